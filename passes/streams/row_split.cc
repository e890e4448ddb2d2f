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

namespace {

// Whether var `name`'s row blocks can be views of it from op `index` on: every dim before
// the rows is 1 (the blocks lie one after another) and no op from `index` on writes it.
bool RowsAsView(const Program& program, int index, const std::string& name) {
  const Var* x = program.FindVar(name);
  if (!x || x->shape.size() < 2) return false;
  for (size_t d = 0; d + 2 < x->shape.size(); ++d)
    if (x->shape[d] != 1) return false;
  return !FirstWriteAfter(program, index, [&](const std::string& v) { return v == name; });
}

}  // namespace

bool SplitsAsView(const Program& program, int index) {
  return RowsAsView(program, index, program.ops()[index].Input("X"));
}

namespace {

// How many ops of `program` read `var`, counting its export to other programs as one.
int Readers(const Program& program, const std::string& var) {
  int readers = 0;
  for (const Op& op : program.ops())
    op.ForEachInput([&](const std::string& v) { readers += v == var; });
  for (const std::string& v : program.info().outputs) readers += v == var;
  return readers;
}

// Whether the all-reduce at `index + 1` is the only reader of the matmul at `index`.
bool OnlyAllReduceReads(const Program& program, int index) {
  const std::vector<Op>& ops = program.ops();
  if (index + 1 >= static_cast<int>(ops.size())) return false;
  const Op& reduce = ops[index + 1];
  const std::string out = ops[index].Output("Out");
  if (reduce.type != "c_allreduce_sum" || reduce.Input("X") != out || reduce.Output("Out") == out ||
      !reduce.wait_events.empty() || !reduce.record_events.empty())
    return false;
  return Readers(program, out) == 1;
}

// The operand of tail op `op` that is not the chain's var `in`: a bias_add's bias, an
// add's other summand.
std::string OtherOperand(const Op& op, const std::string& in) {
  if (op.type == "bias_add") return op.Input("Bias");
  return op.Input("X") == in ? op.Input("Y") : op.Input("X");
}

// The matmul at `index` as split, its row blocks, and concat (see SplitRows); with
// `reduce`, each block's all-reduce after its matmul, then each block's copy of the `tail`
// ops after the all-reduce (RowWiseTail), and the concat of the last op's blocks.
StatusOr<int> Split(Program& program, int index, int blocks, bool reduce, int tail = 0) {
  const Op original = program.ops()[index];
  const Op all_reduce = reduce ? program.ops()[index + 1] : Op{};
  const std::vector<Op> tail_ops(program.ops().begin() + index + 2,
                                 program.ops().begin() + index + 2 + tail);
  const Var x = *program.FindVar(original.Input("X"));
  const std::string out_name = tail > 0 ? tail_ops.back().Output("Out")
                               : reduce ? all_reduce.Output("Out")
                                        : original.Output("Out");
  const Var out = *program.FindVar(out_name);
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
  auto block_var = [&](const Var& of, int block) {
    Var v = of;
    v.name = FreshName(program, of.name, StrCat(kRowBlockTag, block));
    v.shape[v.shape.size() - 2] = rows;
    v.init = {};
    program.AddVar(v);
    return v.name;
  };
  // The vars of the chain the blocks carry: the all-reduce's output, then each tail op's.
  std::vector<std::string> chain;
  if (reduce) chain.push_back(all_reduce.Output("Out"));
  for (const Op& op : tail_ops) chain.push_back(op.Output("Out"));
  std::vector<std::vector<std::string>> chain_blocks(chain.size());
  for (int b = 0; b < blocks; ++b) {
    x_blocks.push_back(block_var(x, b));
    partial_blocks.push_back(block_var(partial, b));
    for (size_t c = 0; c < chain.size(); ++c)
      chain_blocks[c].push_back(block_var(*program.FindVar(chain[c]), b));
  }
  out_blocks = chain.empty() ? partial_blocks : chain_blocks.back();
  std::vector<Op> ops;
  // Splits of X and of every add's other summand, views where the rows lie one after another.
  auto split_rows = [&](const Var& of, const std::vector<std::string>& into) {
    Op split = like(original, "split");
    split.SetInput("X", {of.name}).SetOutput("Out", into);
    split.SetAttr("axis", axis).SetAttr("sections", std::vector<int64_t>(blocks, rows));
    if (RowsAsView(program, index, of.name)) split.SetAttr("view", true);
    ops.push_back(std::move(split));
  };
  split_rows(x, x_blocks);
  std::vector<std::vector<std::string>> operand_blocks(tail_ops.size());
  for (size_t t = 0; t < tail_ops.size(); ++t) {
    if (tail_ops[t].type != "add") continue;
    const Var operand = *program.FindVar(OtherOperand(tail_ops[t], chain[t]));
    for (int b = 0; b < blocks; ++b) operand_blocks[t].push_back(block_var(operand, b));
    split_rows(operand, operand_blocks[t]);
  }
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
    ar.outputs.front().vars = {chain_blocks[0][b]};
    ops.push_back(std::move(ar));
  }
  // Each block's tail once its all-reduce is in: those of the first blocks run while the
  // last blocks' all-reduces are still on the link.
  for (int b = 0; b < blocks; ++b)
    for (size_t t = 0; t < tail_ops.size(); ++t) {
      Op op = tail_ops[t];
      const std::string other = OtherOperand(op, chain[t]);
      for (Slot& s : op.inputs)
        for (std::string& v : s.vars) {
          if (v == chain[t]) {
            v = chain_blocks[t][b];
          } else if (v == other && !operand_blocks[t].empty()) {
            v = operand_blocks[t][b];
          }
        }
      op.outputs.front().vars = {chain_blocks[t + 1][b]};
      ops.push_back(std::move(op));
    }
  Op concat = like(original, "concat");
  concat.SetInput("X", out_blocks).SetOutput("Out", {out.name});
  concat.SetAttr("axis", static_cast<int64_t>(out.shape.size()) - 2);
  ops.push_back(std::move(concat));
  std::vector<Op>& all = program.ops();
  all.erase(all.begin() + index, all.begin() + index + (reduce ? 2 + tail : 1));
  all.insert(all.begin() + index, ops.begin(), ops.end());
  // The whole vars only blocks now carry: the matmul's, and every chain var but the last.
  program.RemoveVarsIf([&](const Var& v) {
    if (!reduce) return false;
    if (v.name == partial.name) return true;
    return std::find(chain.begin(), chain.end() - 1, v.name) != chain.end() - 1;
  });
  return static_cast<int>(ops.size());
}

}  // namespace

StatusOr<int> SplitRows(Program& program, int index, int blocks) {
  if (!CanSplitRows(program, index, blocks, 1))
    return InvalidArgument("op ", index, " of program '", program.name(),
                           "' is not a matmul whose rows split into ", blocks, " blocks");
  return Split(program, index, blocks, false);
}

bool CanSplitRowsWithAllReduce(const Program& program, int index, int blocks, int64_t min_rows) {
  return CanSplitRows(program, index, blocks, min_rows) && OnlyAllReduceReads(program, index);
}

int RowWiseTail(const Program& program, int index) {
  const std::vector<Op>& ops = program.ops();
  if (!OnlyAllReduceReads(program, index)) return 0;
  const Var* x = program.FindVar(ops[index].Input("X"));
  int tail = 0;
  std::string in = ops[index + 1].Output("Out");
  for (size_t k = index + 2; k < ops.size(); ++k, ++tail) {
    const Op& op = ops[k];
    const Var* chain = program.FindVar(in);
    const Var* out = program.FindVar(op.Output("Out"));
    if (!chain || !out || out->shape != chain->shape || out->persistable) break;
    if (!op.wait_events.empty() || !op.record_events.empty() || Readers(program, in) != 1) break;
    if (op.type == "bias_add") {
      const Var* bias = program.FindVar(op.Input("Bias"));
      if (op.Input("X") != in || !bias || bias->shape.size() != 1) break;
    } else if (op.type == "add") {
      if (op.Input("X") != in && op.Input("Y") != in) break;
      const std::string other = OtherOperand(op, in);
      const Var* summand = program.FindVar(other);
      // Cut into the same row blocks before the matmul: same shape as the chain, and made
      // by none of the ops the blocks replace.
      bool made_here = false;
      for (size_t j = index; j < k; ++j)
        ops[j].ForEachOutput([&](const std::string& v) { made_here = made_here || v == other; });
      if (other == in || made_here || !summand || summand->persistable ||
          summand->shape != chain->shape || !x || summand->shape.size() != x->shape.size())
        break;
    } else {
      break;
    }
    in = op.Output("Out");
  }
  return tail;
}

StatusOr<int> SplitRowsWithAllReduce(Program& program, int index, int blocks, int tail) {
  if (!CanSplitRowsWithAllReduce(program, index, blocks, 1))
    return InvalidArgument("op ", index, " of program '", program.name(),
                           "' is not a matmul read only by an all-reduce, its rows splitting into ",
                           blocks, " blocks");
  if (tail < 0 || tail > RowWiseTail(program, index))
    return InvalidArgument("op ", index, " of program '", program.name(), "' is not followed by ",
                           tail, " row-wise ops");
  return Split(program, index, blocks, true, tail);
}

}  // namespace pw
