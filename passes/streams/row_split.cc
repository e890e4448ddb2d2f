#include "passes/streams/row_split.h"

#include <algorithm>

#include "ir/graph.h"

namespace pw {
namespace {

// A var name not declared in `program`: base + suffix, numbered if taken.
std::string FreshName(const Program& program, const std::string& base, const std::string& suffix) {
  std::string name = base + suffix;
  for (int n = 1; program.HasVar(name); ++n) name = StrCat(base, suffix, ".", n);
  return name;
}

}  // namespace

bool CanSplitRows(const Program& program, int index, int blocks, int64_t min_rows) {
  if (index < 0 || index >= static_cast<int>(program.ops().size()) || blocks < 2) return false;
  const Op& op = program.ops()[index];
  if (op.type != "matmul" || op.attrs.GetBool("trans_x", false)) return false;
  if (!op.wait_events.empty() || !op.record_events.empty()) return false;
  const Var* x = program.FindVar(op.Input("X"));
  const Var* out = program.FindVar(op.Output("Out"));
  if (!x || !out || x->shape.size() < 2 || x->persistable) return false;
  const Var* y = program.FindVar(op.Input("Y"));
  const int64_t rows = x->shape[x->shape.size() - 2];
  if (!y || rows % blocks) return false;
  // A Y shared by every batch folds X's batch into the GEMM's rows.
  int64_t gemm_rows = rows / blocks;
  if (y->shape.size() == 2)
    for (size_t d = 0; d + 2 < x->shape.size(); ++d) gemm_rows *= x->shape[d];
  return gemm_rows >= std::max(min_rows, kMinSplitRows) && out->shape.back() >= kMinSplitColumns;
}

bool SplitsAsView(const Program& program, int index) {
  const std::string& name = program.ops()[index].Input("X");
  const Var* x = program.FindVar(name);
  if (!x || x->shape.size() < 2) return false;
  for (size_t d = 0; d + 2 < x->shape.size(); ++d)
    if (x->shape[d] != 1) return false;
  return !FirstWriteAfter(program, index, [&](const std::string& v) { return v == name; });
}

namespace {

// Whether the all-reduce at `index + 1` is the only reader of the matmul at `index`.
bool OnlyAllReduceReads(const Program& program, int index) {
  const std::vector<Op>& ops = program.ops();
  if (index + 1 >= static_cast<int>(ops.size())) return false;
  const Op& reduce = ops[index + 1];
  const std::string out = ops[index].Output("Out");
  if (reduce.type != "c_allreduce_sum" || reduce.Input("X") != out || reduce.Output("Out") == out ||
      !reduce.wait_events.empty() || !reduce.record_events.empty())
    return false;
  int readers = 0;
  for (const Op& op : ops) op.ForEachInput([&](const std::string& v) { readers += v == out; });
  for (const std::string& v : program.info().outputs) readers += v == out;
  return readers == 1;
}

// The matmul at `index` as split, its row blocks, and concat (see SplitRows); with
// `reduce`, each block's all-reduce after its matmul and the concat of the reduced blocks.
StatusOr<int> Split(Program& program, int index, int blocks, bool reduce) {
  const Op original = program.ops()[index];
  const Op all_reduce = reduce ? program.ops()[index + 1] : Op{};
  const Var x = *program.FindVar(original.Input("X"));
  const Var out = *program.FindVar(reduce ? all_reduce.Output("Out") : original.Output("Out"));
  const Var partial = *program.FindVar(original.Output("Out"));
  const int64_t axis = static_cast<int64_t>(x.shape.size()) - 2;
  const int64_t rows = x.shape[axis] / blocks;

  auto like = [&](const Op& from, std::string type) {
    Op op;
    op.type = std::move(type);
    op.role = from.role;
    op.stage = from.stage;
    op.chunk = from.chunk;
    op.stream = from.stream;
    op.weight_grad = from.weight_grad;
    return op;
  };
  std::vector<std::string> x_blocks, partial_blocks, out_blocks;
  auto block_var = [&](const Var& of, const std::string& suffix) {
    Var v = of;
    v.name = FreshName(program, of.name, suffix);
    v.shape[v.shape.size() - 2] = rows;
    v.init = {};
    program.AddVar(v);
    return v.name;
  };
  for (int b = 0; b < blocks; ++b) {
    x_blocks.push_back(block_var(x, StrCat("@ROWS", b)));
    partial_blocks.push_back(block_var(partial, StrCat("@ROWS", b)));
    out_blocks.push_back(reduce ? block_var(out, StrCat("@ROWS", b)) : partial_blocks.back());
  }
  std::vector<Op> ops;
  Op split = like(original, "split");
  split.SetInput("X", {x.name}).SetOutput("Out", x_blocks);
  split.SetAttr("axis", axis).SetAttr("sections", std::vector<int64_t>(blocks, rows));
  if (SplitsAsView(program, index)) split.SetAttr("view", true);
  ops.push_back(std::move(split));
  for (int b = 0; b < blocks; ++b) {
    Op mm = original;
    for (Slot& s : mm.inputs)
      if (s.name == "X") s.vars = {x_blocks[b]};
    for (Slot& s : mm.outputs)
      if (s.name == "Out") s.vars = {partial_blocks[b]};
    ops.push_back(std::move(mm));
    if (!reduce) continue;
    Op ar = all_reduce;
    ar.inputs.front().vars = {partial_blocks[b]};
    ar.outputs.front().vars = {out_blocks[b]};
    ops.push_back(std::move(ar));
  }
  Op concat = like(original, "concat");
  concat.SetInput("X", out_blocks).SetOutput("Out", {out.name});
  concat.SetAttr("axis", static_cast<int64_t>(out.shape.size()) - 2);
  ops.push_back(std::move(concat));
  std::vector<Op>& all = program.ops();
  all.erase(all.begin() + index, all.begin() + index + (reduce ? 2 : 1));
  all.insert(all.begin() + index, ops.begin(), ops.end());
  if (reduce) program.RemoveVarsIf([&](const Var& v) { return v.name == partial.name; });
  return static_cast<int>(ops.size());
}

}  // namespace

StatusOr<int> SplitRows(Program& program, int index, int blocks) {
  if (!CanSplitRows(program, index, blocks, 1))
    return InvalidArgument("op ", index, " of program '", program.name(),
                           "' is not a matmul whose rows split into ", blocks, " blocks");
  return Split(program, index, blocks, false);
}

bool CanSplitRowsWithAllReduce(const Program& program, int index, int blocks, int64_t min_rows,
                               int group_size) {
  return group_size == 2 && CanSplitRows(program, index, blocks, min_rows) &&
         OnlyAllReduceReads(program, index);
}

StatusOr<int> SplitRowsWithAllReduce(Program& program, int index, int blocks, int group_size) {
  if (!CanSplitRowsWithAllReduce(program, index, blocks, 1, group_size))
    return InvalidArgument("op ", index, " of program '", program.name(),
                           "' is not a matmul read only by a two-rank all-reduce, its rows "
                           "splitting into ",
                           blocks, " blocks");
  return Split(program, index, blocks, true);
}

}  // namespace pw
