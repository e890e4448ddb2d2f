#include "passes/streams/row_split_choice.h"

#include <functional>

#include "cost_model/op_price.h"
#include "ir/p2p_vars.h"
#include "ir/rank_layout.h"
#include "passes/streams/interleave.h"
#include "passes/streams/row_split.h"

namespace pw {
namespace {

constexpr int kMaxRowBlocks = 8;

// How many row blocks make a matmul (or a sum of matmuls) and its all-reduce finish
// soonest, by the cost model: k blocks cost a copy of the rows in (`rows_in_bytes`: none
// when they are views of X) and of the reduced result out, k all-reduces of 1/k of the bytes
// (each with its latency) and two hand-overs each; all but the last run under the next
// block's matmul (`compute_seconds` in all), and each block's row-wise tail (`tail_seconds`
// in all) once its all-reduce is in. `can_split(k)` says which k the ops allow. 1: not
// worth cutting.
int BestBlocks(DataType dtype, double rows_in_bytes, double compute_seconds,
               const cost::OpPrice& reduce, double tail_seconds,
               const std::function<bool(int)>& can_split, const cost::Estimator& estimator) {
  const cost::DeviceSpec& device = estimator.device();
  const double copies = cost::RooflineTime(device, dtype, 0, rows_in_bytes + 2.0 * reduce.bytes);
  InterleaveOptions options;
  options.event_latency = device.event_latency();
  auto finish = [&](int k) {
    std::vector<ChainOp> chain;
    std::vector<int> reduced;
    if (k > 1) chain.push_back(ChainOp{copies / 2, false, -1});
    for (int b = 0; b < k; ++b) {
      const double bytes = reduce.bytes / k;
      const double comm = estimator.comm()
                              .Time(cost::CommKind::kAllReduce, bytes,
                                    static_cast<int>(reduce.group.size()), reduce.span)
                              .seconds;
      chain.push_back(ChainOp{compute_seconds / k, false, -1});
      reduced.push_back(static_cast<int>(chain.size()));
      chain.push_back(ChainOp{comm, true, -1});
    }
    for (int b = 0; b < k; ++b) chain.push_back(ChainOp{tail_seconds / k, false, reduced[b]});
    chain.push_back(ChainOp{k > 1 ? copies / 2 : 0, false, reduced.back()});
    return BackToBack(chain, {}, options).makespan;
  };
  int best = 1;
  double best_time = finish(1);
  for (int k = 2; k <= kMaxRowBlocks; ++k) {
    if (!can_split(k)) continue;
    const double t = finish(k);
    if (t < best_time * 0.999) {
      best = k;
      best_time = t;
    }
  }
  return best;
}

// What copying matmul `index`'s X into row blocks moves (none when the blocks are views).
double RowsInBytes(const Program& program, int index) {
  const Var* x = program.FindVar(program.ops()[index].Input("X"));
  return SplitsAsView(program, index) ? 0 : 2.0 * (x ? x->num_bytes() : 0);
}

DataType XDtype(const Program& program, int index) {
  const Var* x = program.FindVar(program.ops()[index].Input("X"));
  return x ? x->dtype : DataType::kFloat32;
}

// Whether op `index` reads a row block of an earlier cut (a var the split made).
bool ReadsARowBlock(const Program& program, int index) {
  return IsRowBlock(program.ops()[index].Input("X"));
}

}  // namespace

int PricingRank(const Module& module, const Program& program) {
  return RankLayout(module.mesh).Rank(RankCoord{0, ProgramPipelineRank(module, program), 0});
}

RowSplitCounts SplitRowParallelMatmuls(const Module& module, Program& program, RowSplitMode mode,
                                       PassContext& context) {
  const bool all = mode == RowSplitMode::kAll;
  RowSplitCounts counts;
  const std::string& kind = program.info().kind;
  if (kind != "forward" && kind != "backward" && kind != "backward_input") return counts;
  const cost::Estimator& estimator = *context.Find<cost::Estimator>();
  auto lookup = [&](const std::string& v) -> const Var* { return program.FindVar(v); };
  const int rank = PricingRank(module, program);
  std::vector<cost::OpPrice> prices;
  for (const Op& op : program.ops()) {
    StatusOr<cost::OpPrice> price =
        cost::PriceOp(op, module, rank, estimator, context.ops(), lookup);
    prices.push_back(price.ok() ? *price : cost::OpPrice{});
  }
  for (int i = static_cast<int>(program.ops().size()); i-- > 0;) {
    const bool reduced = i + 1 < static_cast<int>(prices.size()) && prices[i + 1].collective;
    const int group = reduced ? static_cast<int>(prices[i + 1].group.size()) : 0;
    const int tail = RowWiseTail(program, i);
    // Linears sharing their input: the sum of their input-gradient matmuls, cut with its
    // all-reduce; the loop then goes on before the first of them.
    const int summed = SummedMatmuls(program, i);
    if (summed > 0 && reduced && !ReadsARowBlock(program, i - summed)) {
      const int first = i - summed;
      int blocks = 0;
      if (all) {
        blocks = CanSplitRowsOfSumWithAllReduce(program, i, 2, 1) ? 2 : 0;
      } else if (kind == "forward" ||
                 (mode == RowSplitMode::kForwardBackwardInput && kind == "backward_input")) {
        double compute = prices[i].seconds, rows_in = 0, tail_seconds = 0;
        for (int k = first; k < i; ++k) {
          compute += prices[k].seconds;
          rows_in += RowsInBytes(program, k);
        }
        for (int t = 0; t < tail; ++t) tail_seconds += prices[i + 2 + t].seconds;
        blocks = BestBlocks(
            XDtype(program, first), rows_in, compute, prices[i + 1], tail_seconds,
            [&](int k) { return CanSplitRowsOfSumWithAllReduce(program, i, k, kMinSplitRows); },
            estimator);
      }
      if (blocks > 1 && SplitRowsOfSumWithAllReduce(program, i, blocks, tail).ok()) {
        counts.matmuls += summed;
        counts.wide_all_reduces += group > 2;
        i = first;
      }
      continue;
    }
    if (all) {
      const bool with_reduce = reduced && CanSplitRowsWithAllReduce(program, i, 2, 1);
      StatusOr<int> done =
          with_reduce ? SplitRowsWithAllReduce(program, i, 2, tail) : SplitRows(program, i, 2);
      counts.matmuls += done.ok();
      counts.wide_all_reduces += done.ok() && with_reduce && group > 2;
      continue;
    }
    // A full backward's all-reduces run under its weight gradient
    // (overlap-column-parallel-backward): only forwards and split backwards' I are cut.
    const bool cut_kind = kind == "forward" ||
                          (mode == RowSplitMode::kForwardBackwardInput && kind == "backward_input");
    if (!reduced || !cut_kind || ReadsARowBlock(program, i)) continue;
    double tail_seconds = 0;
    for (int t = 0; t < tail; ++t) tail_seconds += prices[i + 2 + t].seconds;
    const int blocks = BestBlocks(
        XDtype(program, i), RowsInBytes(program, i), prices[i].seconds, prices[i + 1], tail_seconds,
        [&](int k) { return CanSplitRowsWithAllReduce(program, i, k, kMinSplitRows); }, estimator);
    if (blocks > 1 && SplitRowsWithAllReduce(program, i, blocks, tail).ok()) {
      ++counts.matmuls;
      counts.wide_all_reduces += group > 2;
    }
  }
  return counts;
}

}  // namespace pw
