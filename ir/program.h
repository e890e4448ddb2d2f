#pragma once
// An ordered list of ops over declared vars (one block, no control flow).

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/op.h"
#include "ir/var.h"

namespace pw {

// What split-program records about a sub-program.
struct ProgramInfo {
  std::string kind;  // forward, backward, backward_input, backward_weight, optimizer
  int stage = -1;
  int chunk = 0;
  std::vector<std::string> inputs;      // vars read here but defined by another program
  std::vector<std::string> outputs;     // vars defined here that another program reads
  std::vector<std::string> keep_alive;  // vars a later job still needs
  // A segment of another program (overlap-1f1b): the program it was cut from, whose kind,
  // stage and chunk it has; jobs run it in the parent's place. Empty for other programs.
  std::string segment_of;
  int segment_begin = 0;  // the parent's index of the segment's first op
  // Another program's computation with other ops (overlap-1f1b's row splits), whose kind,
  // stage and chunk it has: jobs may run it in that program's place, with the same results.
  std::string variant_of;
  bool operator==(const ProgramInfo&) const = default;
};

// Hashes std::string and std::string_view alike, so lookups by view do not allocate.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Program {
 public:
  Program() = default;
  explicit Program(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  ProgramInfo& info() { return info_; }
  const ProgramInfo& info() const { return info_; }

  // Vars. Pointers returned by FindVar stay valid until the next AddVar/RemoveVars.
  const std::vector<Var>& vars() const { return vars_; }
  const Var* FindVar(std::string_view name) const;
  Var* FindVar(std::string_view name);
  // The position of a var in vars(), or -1.
  int64_t VarIndex(std::string_view name) const;
  bool HasVar(std::string_view name) const { return FindVar(name) != nullptr; }
  // Adds `var`; returns false (and changes nothing) when a var of that name exists.
  bool AddVar(Var var);
  // Removes every var for which pred(var) is true; returns how many were removed.
  template <typename Pred>
  size_t RemoveVarsIf(Pred pred);
  void ReserveVars(size_t n);

  // Ops, in execution order.
  std::vector<Op>& ops() { return ops_; }
  const std::vector<Op>& ops() const { return ops_; }
  Op& AddOp(Op op) {
    ops_.push_back(std::move(op));
    return ops_.back();
  }

  bool operator==(const Program& other) const {
    return name_ == other.name_ && info_ == other.info_ && vars_ == other.vars_ &&
           ops_ == other.ops_;
  }

 private:
  void Reindex();

  std::string name_;
  ProgramInfo info_;
  std::vector<Var> vars_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> var_index_;
  std::vector<Op> ops_;
};

template <typename Pred>
size_t Program::RemoveVarsIf(Pred pred) {
  size_t before = vars_.size();
  std::erase_if(vars_, pred);
  if (vars_.size() != before) Reindex();
  return before - vars_.size();
}

}  // namespace pw
