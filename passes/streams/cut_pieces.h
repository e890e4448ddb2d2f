#pragma once
// What the stream passes that cut an op into pieces (row-split, collective matmul) share:
// the ops they add (blocks, splits, joins, transfers) run where the cut op ran, and the
// vars they declare get names the program does not have yet.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"
#include "ir/program.h"
#include "ir/status.h"

namespace pw {

// An op of `type` with `from`'s role, pipeline stage and chunk, stream and weight-gradient
// part.
inline Op OpLike(const Op& from, std::string type) {
  Op op;
  op.type = std::move(type);
  op.role = from.role;
  op.stage = from.stage;
  op.chunk = from.chunk;
  op.stream = from.stream;
  op.weight_grad = from.weight_grad;
  return op;
}

// A var name not declared in `program`: base + suffix, numbered if taken.
inline std::string FreshName(const Program& program, const std::string& base,
                             const std::string& suffix) {
  std::string name = base + suffix;
  for (int n = 1; program.HasVar(name); ++n) name = StrCat(base, suffix, ".", n);
  return name;
}

// Declares a piece of `of`: named from it, `extent` along `axis`, neither persistable nor a
// parameter. Returns its name.
inline std::string DeclarePiece(Program& program, const Var& of, const std::string& suffix,
                                int axis, int64_t extent) {
  Var v = of;
  v.name = FreshName(program, of.name, suffix);
  v.shape[axis] = extent;
  v.init = {};
  v.persistable = false;
  v.is_parameter = false;
  program.AddVar(v);
  return v.name;
}

// OpLike, and the same origin: a cut-up backward op's pieces belong to the same forward op.
inline Op PieceOf(const Op& from, std::string type) {
  Op op = OpLike(from, std::move(type));
  op.origin = from.origin;
  return op;
}

inline bool ReadsVar(const Op& op, const std::string& var) {
  bool reads = false;
  op.ForEachInput([&](const std::string& v) { reads = reads || v == var; });
  return reads;
}

inline bool WritesVar(const Op& op, const std::string& var) {
  bool writes = false;
  op.ForEachOutput([&](const std::string& v) { writes = writes || v == var; });
  return writes;
}

// Whether op `from` or a later one writes `var`.
inline bool WrittenFrom(const Program& program, size_t from, const std::string& var) {
  for (size_t i = from; i < program.ops().size(); ++i)
    if (WritesVar(program.ops()[i], var)) return true;
  return false;
}

// Whether slices of `var` along `axis` can be its own bytes (split{view}): they lie one after
// another (every dim before the axis is 1) and no op from `from` on writes it.
inline bool SlicesAsViews(const Program& program, const Var& var, int axis, size_t from) {
  for (int d = 0; d < axis; ++d)
    if (var.shape[d] != 1) return false;
  return !WrittenFrom(program, from, var.name);
}

// A collective's cut: its group, member count and axis (made non-negative by `any`'s rank).
struct CollectiveCut {
  std::string group;
  int members = 1;
  int axis = 0;
};

inline CollectiveCut CutOf(const Op& collective, const Var& any) {
  CollectiveCut cut;
  cut.group = collective.attrs.GetString("group", "mp");
  cut.members = static_cast<int>(collective.attrs.GetInt("nranks", 1));
  int64_t axis = collective.attrs.GetInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(any.shape.size());
  cut.axis = static_cast<int>(axis);
  return cut;
}

// `ops` rebuilt: op `at` replaced by `at_ops`, `before_ops` put before op `before`, and the
// ops whose indices are in `dropped` (those the pieces replace) left out.
inline void Splice(std::vector<Op>& ops, int at, std::vector<Op> at_ops, int before,
                   std::vector<Op> before_ops, const std::vector<int>& dropped) {
  std::vector<Op> rebuilt;
  rebuilt.reserve(ops.size() + at_ops.size() + before_ops.size());
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (i == before)
      for (Op& op : before_ops) rebuilt.push_back(std::move(op));
    if (i == at) {
      for (Op& op : at_ops) rebuilt.push_back(std::move(op));
      continue;
    }
    if (std::find(dropped.begin(), dropped.end(), i) != dropped.end()) continue;
    rebuilt.push_back(std::move(ops[i]));
  }
  ops = std::move(rebuilt);
}

// Whether `var` is one of the program's outputs (another program reads it).
inline bool ExportedVar(const Program& program, const std::string& var) {
  const auto& out = program.info().outputs;
  return std::find(out.begin(), out.end(), var) != out.end();
}

}  // namespace pw
