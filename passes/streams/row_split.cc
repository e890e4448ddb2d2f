#include "passes/streams/row_split.h"

#include <algorithm>
#include <set>

#include "ir/graph.h"
#include "passes/streams/cut_pieces.h"

namespace pw {

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

bool MultipliesRowBlocks(const Program& program, const Module& module, const Op& op,
                         const std::string& x, int axis, int64_t blocks) {
  if (op.type != "matmul" || op.Input("X") != x || op.attrs.GetBool("trans_x", false)) return false;
  if (!op.wait_events.empty() || !op.record_events.empty()) return false;
  const Var* xv = program.FindVar(x);
  const Var* y = module.FindVar(op.Input("Y"), &program);
  const Var* out = program.FindVar(op.Output("Out"));
  if (!xv || !y || !out || y->shape.size() != 2 || xv->shape.size() < 2) return false;
  if (axis < 0 || axis + 1 >= static_cast<int>(xv->shape.size())) return false;
  if (blocks < 1 || xv->shape[axis] % blocks != 0) return false;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < xv->shape.size(); ++d) rows *= xv->shape[d];
  return rows / blocks >= kMinSplitRows && out->shape.back() >= kMinSplitColumns;
}

namespace {

// Whether var `name`'s row blocks can be views of it after op `index`.
bool RowsAsView(const Program& program, int index, const std::string& name) {
  const Var* x = program.FindVar(name);
  return x && x->shape.size() >= 2 &&
         SlicesAsViews(program, *x, static_cast<int>(x->shape.size()) - 2,
                       static_cast<size_t>(index) + 1);
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
// add's other summand, a bias_dropout_add's residual (a dropout has none).
std::string OtherOperand(const Op& op, const std::string& in) {
  if (op.type == "dropout") return "";
  if (op.type == "bias_add") return op.Input("Bias");
  if (op.type == "bias_dropout_add") return op.Input("Residual");
  return op.Input("X") == in ? op.Input("Y") : op.Input("X");
}

// Tail ops whose other operand has the chain's shape and is cut into the same row blocks.
bool CutsOperand(const Op& op) { return op.type == "add" || op.type == "bias_dropout_add"; }

// Tail ops that draw a dropout mask: a dropout, a bias_dropout_add with p > 0.
bool DrawsMask(const Op& op) {
  return op.type == "dropout" || (op.type == "bias_dropout_add" && op.attrs.GetFloat("p", 0) > 0);
}

// Whether a block of the rows along `axis` can draw its part of the whole tensor's mask:
// the op's mask is not cut into blocks already, and any shard it is of lies along the same
// axis (DropoutLayout nests the blocks in the shard).
bool MaskCutsAlong(const Op& op, int64_t axis) {
  if (op.attrs.GetInt("block_count", 1) != 1) return false;
  return op.attrs.GetInt("shard_count", 1) <= 1 || op.attrs.GetInt("shard_axis", -1) == axis;
}

// The ops a row split replaces, from op `first` on: `matmuls` matmuls (one, or those a
// sum adds up), the sum (`summed`), the all-reduce (`reduce`) and `tail` row-wise ops.
struct SplitSpan {
  int first = 0;
  int matmuls = 1;
  bool summed = false;
  bool reduce = false;
  int tail = 0;
};

// The span as split, its row blocks, and concat (see SplitRows); with `reduce`, per block
// its matmuls (and their sum) and its all-reduce, then each block's copy of the tail ops
// (RowWiseTail), and the concat of the last op's blocks.
StatusOr<int> Split(Program& program, const SplitSpan& span, int blocks) {
  const std::vector<Op> originals(program.ops().begin() + span.first,
                                  program.ops().begin() + span.first + span.matmuls);
  int at = span.first + span.matmuls;
  const Op sum = span.summed ? program.ops()[at++] : Op{};
  const Op all_reduce = span.reduce ? program.ops()[at++] : Op{};
  const std::vector<Op> tail_ops(program.ops().begin() + at,
                                 program.ops().begin() + at + span.tail);
  const Op& original = originals.front();
  std::vector<Var> xs, products;
  for (const Op& mm : originals) {
    xs.push_back(*program.FindVar(mm.Input("X")));
    products.push_back(*program.FindVar(mm.Output("Out")));
  }
  const Var partial = span.summed ? *program.FindVar(sum.Output("Out")) : products.front();
  const std::string out_name = span.tail > 0 ? tail_ops.back().Output("Out")
                               : span.reduce ? all_reduce.Output("Out")
                                             : partial.name;
  const Var out = *program.FindVar(out_name);
  const int64_t axis = static_cast<int64_t>(xs.front().shape.size()) - 2;
  const int64_t rows = xs.front().shape[axis] / blocks;

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
  if (span.reduce) chain.push_back(all_reduce.Output("Out"));
  for (const Op& op : tail_ops) chain.push_back(op.Output("Out"));
  std::vector<std::vector<std::string>> x_blocks(originals.size()),
      product_blocks(originals.size()), chain_blocks(chain.size());
  std::vector<std::string> partial_blocks;
  for (int b = 0; b < blocks; ++b) {
    for (size_t m = 0; m < originals.size(); ++m) {
      x_blocks[m].push_back(block_var(xs[m], b));
      if (span.summed) product_blocks[m].push_back(block_var(products[m], b));
    }
    partial_blocks.push_back(block_var(partial, b));
    if (!span.summed) product_blocks[0].push_back(partial_blocks.back());
    for (size_t c = 0; c < chain.size(); ++c)
      chain_blocks[c].push_back(block_var(*program.FindVar(chain[c]), b));
  }
  const std::vector<std::string>& out_blocks = chain.empty() ? partial_blocks : chain_blocks.back();
  std::vector<Op> ops;
  // Splits of each X and of every add's other summand, views where the rows lie one after
  // another.
  auto split_rows = [&](const Var& of, const std::vector<std::string>& into) {
    Op split = OpLike(original, "split");
    split.SetInput("X", {of.name}).SetOutput("Out", into);
    split.SetAttr("axis", axis).SetAttr("sections", std::vector<int64_t>(blocks, rows));
    if (RowsAsView(program, span.first, of.name)) split.SetAttr("view", true);
    ops.push_back(std::move(split));
  };
  for (size_t m = 0; m < originals.size(); ++m) split_rows(xs[m], x_blocks[m]);
  std::vector<std::vector<std::string>> operand_blocks(tail_ops.size());
  for (size_t t = 0; t < tail_ops.size(); ++t) {
    if (!CutsOperand(tail_ops[t])) continue;
    const Var operand = *program.FindVar(OtherOperand(tail_ops[t], chain[t]));
    for (int b = 0; b < blocks; ++b) operand_blocks[t].push_back(block_var(operand, b));
    split_rows(operand, operand_blocks[t]);
  }
  for (int b = 0; b < blocks; ++b) {
    for (size_t m = 0; m < originals.size(); ++m) {
      Op mm = originals[m];
      for (Slot& s : mm.inputs)
        if (s.name == "X") s.vars = {x_blocks[m][b]};
      for (Slot& s : mm.outputs)
        if (s.name == "Out") s.vars = {product_blocks[m][b]};
      ops.push_back(std::move(mm));
    }
    if (span.summed) {
      // The summands in the sum's own order: each element adds up as before.
      Op block_sum = sum;
      for (std::string& v : block_sum.inputs.front().vars)
        for (size_t m = 0; m < originals.size(); ++m)
          if (v == products[m].name) {
            v = product_blocks[m][b];
            break;
          }
      block_sum.outputs.front().vars = {partial_blocks[b]};
      ops.push_back(std::move(block_sum));
    }
    if (!span.reduce) continue;
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
      // A block draws its rows' part of the whole tensor's mask.
      if (DrawsMask(op))
        op.SetAttr("shard_axis", axis)
            .SetAttr("block_count", static_cast<int64_t>(blocks))
            .SetAttr("block", static_cast<int64_t>(b));
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
  Op concat = OpLike(original, "concat");
  concat.SetInput("X", out_blocks).SetOutput("Out", {out.name});
  concat.SetAttr("axis", static_cast<int64_t>(out.shape.size()) - 2);
  ops.push_back(std::move(concat));
  std::vector<Op>& all = program.ops();
  all.erase(all.begin() + span.first, all.begin() + at + span.tail);
  all.insert(all.begin() + span.first, ops.begin(), ops.end());
  // The whole vars only blocks now carry: the matmuls' (and the sum's), and every chain var
  // but the last.
  program.RemoveVarsIf([&](const Var& v) {
    if (!span.reduce) return false;
    if (v.name == partial.name) return true;
    for (const Var& product : products)
      if (v.name == product.name) return true;
    return std::find(chain.begin(), chain.end() - 1, v.name) != chain.end() - 1;
  });
  return static_cast<int>(ops.size());
}

}  // namespace

StatusOr<int> SplitRows(Program& program, int index, int blocks) {
  if (!CanSplitRows(program, index, blocks, 1))
    return InvalidArgument("op ", index, " of program '", program.name(),
                           "' is not a matmul whose rows split into ", blocks, " blocks");
  return Split(program, SplitSpan{index, 1, false, false, 0}, blocks);
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
    if (op.type != "bias_add" && op.type != "add" && op.type != "bias_dropout_add" &&
        op.type != "dropout")
      break;
    if (op.Input("X") != in && (op.type == "dropout" || op.type == "bias_dropout_add")) break;
    // A mask is drawn by the whole tensor's indices: a block says which rows it holds.
    if (DrawsMask(op) && (!x || chain->shape.size() != x->shape.size() ||
                          !MaskCutsAlong(op, static_cast<int64_t>(x->shape.size()) - 2)))
      break;
    if (op.type == "bias_add" || op.type == "bias_dropout_add") {
      const Var* bias = program.FindVar(op.Input("Bias"));
      if (op.Input("X") != in || !bias || bias->shape.size() != 1) break;
    }
    if (CutsOperand(op)) {
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
  return Split(program, SplitSpan{index, 1, false, true, tail}, blocks);
}

int SummedMatmuls(const Program& program, int index) {
  const std::vector<Op>& ops = program.ops();
  if (index < 0 || index >= static_cast<int>(ops.size())) return 0;
  const Op& sum = ops[index];
  if (sum.type != "sum" || !sum.wait_events.empty() || !sum.record_events.empty()) return 0;
  const std::vector<std::string>& summands = sum.inputs.front().vars;
  const int n = static_cast<int>(summands.size());
  if (n < 2 || n > index) return 0;
  // Each summand made by one of the n ops right before the sum, a matmul read only by it.
  std::set<std::string> made;
  for (int k = index - n; k < index; ++k) {
    const Op& mm = ops[k];
    if (mm.type != "matmul" || !mm.wait_events.empty() || !mm.record_events.empty()) return 0;
    const std::string& out = mm.Output("Out");
    if (Readers(program, out) != 1) return 0;
    made.insert(out);
  }
  for (const std::string& v : summands)
    if (!made.count(v)) return 0;
  return static_cast<int>(made.size()) == n ? n : 0;
}

bool CanSplitRowsOfSumWithAllReduce(const Program& program, int index, int blocks,
                                    int64_t min_rows) {
  const int n = SummedMatmuls(program, index);
  if (n == 0 || !OnlyAllReduceReads(program, index)) return false;
  const Var* first_x = program.FindVar(program.ops()[index - n].Input("X"));
  for (int k = index - n; k < index; ++k) {
    if (!CanSplitRows(program, k, blocks, min_rows)) return false;
    // Every X cut into the same row blocks: same rank and the same dims up to the rows.
    const Var* x = program.FindVar(program.ops()[k].Input("X"));
    if (!first_x || x->shape.size() != first_x->shape.size() ||
        !std::equal(x->shape.begin(), x->shape.end() - 1, first_x->shape.begin()))
      return false;
  }
  return true;
}

StatusOr<int> SplitRowsOfSumWithAllReduce(Program& program, int index, int blocks, int tail) {
  if (!CanSplitRowsOfSumWithAllReduce(program, index, blocks, 1))
    return InvalidArgument("op ", index, " of program '", program.name(),
                           "' is not a sum of matmuls read only by an all-reduce, their rows "
                           "splitting into ",
                           blocks, " blocks");
  if (tail < 0 || tail > RowWiseTail(program, index))
    return InvalidArgument("op ", index, " of program '", program.name(), "' is not followed by ",
                           tail, " row-wise ops");
  const int n = SummedMatmuls(program, index);
  return Split(program, SplitSpan{index - n, n, true, true, tail}, blocks);
}

}  // namespace pw
