#pragma once
// One operation of a program: a type, ordered input/output slots naming vars, typed
// attributes, a role, a pipeline placement and its scheduling annotations.

#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"

namespace pw {

enum class OpRole { kUnspecified = 0, kForward, kBackward, kOptimize, kLoss, kCommunication };
const char* OpRoleName(OpRole role);

struct Op;
// The name an op goes by as an origin (Op::origin): its first output var; empty when it
// has none.
std::string OriginName(const Op& op);

struct Slot {
  std::string name;
  std::vector<std::string> vars;
  bool operator==(const Slot&) const = default;
};

struct Op {
  std::string type;
  std::vector<Slot> inputs;
  std::vector<Slot> outputs;
  AttrList attrs;
  OpRole role = OpRole::kForward;
  int stage = -1;      // pipeline stage; -1 when not placed
  int chunk = 0;       // virtual pipeline chunk
  std::string stream;  // named stream type; empty means "compute"
  std::vector<std::string> wait_events;
  std::vector<std::string> record_events;
  bool weight_grad = false;  // produces only weight gradients (zero-bubble W part)
  // The forward op this op was made from (its grad ops, the sums and fills that finish the
  // gradients they read, its parameters' updates), named by that op's first output; empty
  // for forward ops. Passes that move forward ops between stages move these with them.
  std::string origin;

  // The vars of a slot, or nullptr when the op has no such slot.
  const std::vector<std::string>* FindInput(std::string_view slot) const;
  const std::vector<std::string>* FindOutput(std::string_view slot) const;
  // The single var of a slot; empty when the slot is absent or empty.
  const std::string& Input(std::string_view slot) const;
  const std::string& Output(std::string_view slot) const;

  Op& SetInput(std::string slot, std::vector<std::string> vars);
  Op& SetOutput(std::string slot, std::vector<std::string> vars);
  Op& SetAttr(std::string name, Attribute value) {
    attrs.Set(std::move(name), std::move(value));
    return *this;
  }

  // Calls fn(var) for every input / output var, in slot order.
  template <typename Fn>
  void ForEachInput(Fn&& fn) const {
    for (const Slot& s : inputs)
      for (const std::string& v : s.vars) fn(v);
  }
  template <typename Fn>
  void ForEachOutput(Fn&& fn) const {
    for (const Slot& s : outputs)
      for (const std::string& v : s.vars) fn(v);
  }
  // Renames every use (inputs) or definition (outputs) of `from` to `to`.
  void RenameInput(const std::string& from, const std::string& to);
  void RenameOutput(const std::string& from, const std::string& to);

  bool operator==(const Op&) const = default;
};

}  // namespace pw
