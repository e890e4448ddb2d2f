// The sequential reference runner sums every gradient itself, one add per gradient and
// micro-batch, where the executor's weight-gradient GEMMs add into the sums: the rank
// sequence and the simulator build either (fuse_grad_accumulation), so that `sim --runtime
// reference` prices the runner's adds.

#include <gtest/gtest.h>

#include "ir/rank_sequence.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"
#include "tests/small_gpt.h"

namespace pw::cost {
namespace {

constexpr int kMicroBatches = 4;

Module PlannedGpt() {
  auto built = models::BuildGpt(pw::testing::SmallGptConfig());
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline("append-backward{optimizer=adam},split-program,schedule{kind=1f1b,"
                             "micro-batches=" +
                             std::to_string(kMicroBatches) + "}")
                  .ok());
  auto ran = pm.Run(m);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  return m;
}

struct Sums {
  int adds = 0;       // kAccumulate items
  int gemm_sums = 0;  // weight-gradient GEMMs that add into their sums
  size_t grads = 0;
};

Sums CountSums(const Module& m, bool fuse) {
  RankSequenceOptions options;
  options.fuse_grad_accumulation = fuse;
  auto seq = BuildRankSequence(m, 0, options);
  EXPECT_TRUE(seq.ok()) << seq.status().ToString();
  Sums s;
  s.grads = seq->grads.size();
  for (const WorkItem& item : seq->items) {
    s.adds += item.kind == WorkKind::kAccumulate;
    s.gemm_sums += item.accumulate_into >= 0;
  }
  return s;
}

TEST(ReferenceRuntime, EveryGradientIsAddedByItsOwnOpWhenNotFused) {
  const Module m = PlannedGpt();
  const Sums fused = CountSums(m, true), unfused = CountSums(m, false);
  ASSERT_GT(fused.gemm_sums, 0) << "the executor's weight-gradient GEMMs add into the sums";
  // Every gradient is summed once per micro-batch either way.
  EXPECT_EQ(fused.adds + fused.gemm_sums, kMicroBatches * static_cast<int>(fused.grads));
  EXPECT_EQ(unfused.gemm_sums, 0);
  EXPECT_EQ(unfused.adds, kMicroBatches * static_cast<int>(unfused.grads));
}

TEST(ReferenceRuntime, SimulatedStepPricesTheAdds) {
  const Module m = PlannedGpt();
  auto estimator = MakeEstimator("cpu", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  auto step = [&](bool fuse) {
    SimOptions options;
    options.fuse_grad_accumulation = fuse;
    Simulator sim(*estimator, ops::Registry(), options);
    SimGraph graph;
    auto result = sim.Run(m, &graph);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    int adds = 0;
    for (const SimInstr& in : graph.instrs) adds += in.name == "grad_accumulate";
    return std::make_pair(result.ok() ? result->step_time : 0.0, adds);
  };
  auto [fused_time, fused_adds] = step(true);
  auto [unfused_time, unfused_adds] = step(false);
  EXPECT_GT(unfused_adds, fused_adds);
  EXPECT_GT(unfused_time, fused_time);
}

}  // namespace
}  // namespace pw::cost
