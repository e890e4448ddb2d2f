// The simulator orders a plan the way the executor does: the plan's events, and an edge of
// its own for every cross-stream dependency they leave open. After insert-events there is
// none left to add; and the column-parallel overlap hides the backward all-reduces it moves.

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw::cost {
namespace {

Module PlannedGpt(int hidden, int seq, const std::string& extra) {
  models::GptConfig g;
  g.layers = 4;
  g.hidden = hidden;
  g.heads = 8;
  g.ffn = 4 * hidden;
  g.seq = seq;
  g.vocab = 1024;
  g.micro_batch_size = 1;
  g.mp = 2;
  g.pp = 2;
  auto built = models::BuildGpt(g);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline("append-backward{optimizer=adam},split-program,"
                             "schedule{kind=1f1b,micro-batches=8},insert-p2p" +
                             extra)
                  .ok());
  auto ran = pm.Run(m);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  return m;
}

constexpr const char* kOverlap = ",assign-streams,overlap-column-parallel-backward,insert-events";

TEST(SimEventsTest, AfterInsertEventsTheSimulatorAddsNoOrderingOfItsOwn) {
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  Module plain = PlannedGpt(256, 64, "");
  Module overlapped = PlannedGpt(256, 64, kOverlap);
  auto a = BuildSimGraph(plain, **estimator, ops::Registry());
  auto b = BuildSimGraph(overlapped, **estimator, ops::Registry());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->auto_events, 0);  // every send, recv and their readers
  EXPECT_EQ(b->auto_events, 0);
  EXPECT_EQ(a->instrs.size(), b->instrs.size());  // the same work
}

TEST(SimEventsTest, TheColumnParallelOverlapHidesTheBackwardAllReduces) {
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  Simulator simulator(*estimator, ops::Registry());
  auto a = simulator.Run(PlannedGpt(2048, 1024, ""));
  auto b = simulator.Run(PlannedGpt(2048, 1024, kOverlap));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const int backward = static_cast<int>(CommClass::kMpBackward);
  const int forward = static_cast<int>(CommClass::kMpForward);
  EXPECT_GT(a->exposed_by_class[backward], 0);
  EXPECT_LT(b->exposed_by_class[backward], 0.1 * a->exposed_by_class[backward]);
  // The forward all-reduces have nothing to hide under: still exposed.
  EXPECT_GT(b->exposed_by_class[forward], 0.5 * a->exposed_by_class[forward]);
  EXPECT_LT(b->step_time, a->step_time);
}

}  // namespace
}  // namespace pw::cost
