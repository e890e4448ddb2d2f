// Steps back to back (RepeatSteps): each rank issues its next step once its own streams
// have finished the last, with no barrier between ranks beyond the plan's own waits.

#include "simulator/repeat_steps.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace pw::cost {
namespace {

using namespace testing;

// Rank 0 computes 1 s and sends it; rank 1 receives it and computes 1 s. One step takes
// 2 s, but rank 0 is free after 1 s: from the second step on, each rank starts its next
// step while the other finishes, so a step takes 1 s.
GraphBuilder HandOff() {
  GraphBuilder b(2);
  int a = b.Compute(0, 1.0);
  auto [send, recv] = b.Transfer(0, 1, 0.0, {a});
  b.Compute(1, 1.0, {recv});
  return b;
}

TEST(RepeatSteps, RanksStartTheirNextStepWhenTheirOwnStepEnds) {
  GraphBuilder b = HandOff();
  auto one = Simulate(b.graph(), TestDevice());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_NEAR(one->step_time, 2.0, 1e-9);
  auto three = RepeatSteps(b.graph(), 3);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  auto r = Simulate(*three, TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->step_ends.size(), 3u);
  EXPECT_NEAR(r->step_ends[0], 2.0, 1e-9);
  EXPECT_NEAR(r->step_ends[1], 3.0, 1e-9);
  EXPECT_NEAR(r->step_ends[2], 4.0, 1e-9);
}

TEST(RepeatSteps, ACollectiveAtTheEndHoldsEveryRank) {
  // The same hand-off with an all-reduce of both ranks at the end (as fp16's overflow check
  // ends a step): no rank starts its next step before the other has finished.
  GraphBuilder b = HandOff();
  b.Collective({0, 1}, 0.0);
  auto r = Simulate(*RepeatSteps(b.graph(), 3), TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->step_ends[0], 2.0, 1e-9);
  EXPECT_NEAR(r->step_ends[2], 6.0, 1e-9);
}

TEST(RepeatSteps, TheHostIssuesEachStepAfterThePreviousEnds) {
  // Two 1 s ops, one launch (0.1 s) each: the host issues the second step's first op one
  // launch after the first step ended, as it issued the first step's.
  GraphBuilder b(1);
  b.Compute(0, 1.0);
  b.Compute(0, 1.0);
  DeviceSpec d = TestDevice();
  d.set_launch_overhead(0.1);
  auto r = Simulate(*RepeatSteps(b.graph(), 2), d);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->step_ends[0], 2.1, 1e-9);
  EXPECT_NEAR(r->step_ends[1], 4.2, 1e-9);
}

TEST(RepeatSteps, NoStreamRunsAheadIntoTheNextStep) {
  // A 2 s op on one stream beside a 0.5 s one on another: the short one's stream is idle
  // from 0.5 s, but its next step's op waits for the host, which issues the step at 2 s.
  GraphBuilder b(1);
  b.Compute(0, 2.0);
  b.Add(0, StreamType::kDpComm, InstrKind::kCompute, 0.5);
  auto r = Simulate(*RepeatSteps(b.graph(), 2), TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->timeline[3].start, 2.0, 1e-9);
  EXPECT_NEAR(r->step_ends[1], 4.0, 1e-9);
}

TEST(RepeatSteps, CopiesEveryInstructionPerStepAndSharesPersistentSlots) {
  GraphBuilder b = HandOff();
  b.Collective({0, 1}, 0.0);
  SimGraph& g = b.graph();
  g.slots.push_back(SimSlot{0, 64, true, 1});
  g.slots.push_back(SimSlot{0, 32, false, 1});
  g.instrs[0].uses = {0, 1};
  g.instrs[0].allocs = {1};
  auto two = RepeatSteps(g, 2);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  const size_t n = g.instrs.size();
  ASSERT_EQ(two->instrs.size(), 2 * n);
  EXPECT_EQ(two->steps, 2);
  EXPECT_EQ(two->collectives.size(), 2u);
  EXPECT_EQ(two->slots.size(), 3u);  // the persistent slot once, the other per step
  const SimInstr& a = two->instrs[n];
  EXPECT_EQ(a.step, 1);
  EXPECT_EQ(a.uses, (std::vector<int>{0, 2}));
  EXPECT_EQ(a.allocs, (std::vector<int>{2}));
  const SimInstr& send = two->instrs[n + 1];
  EXPECT_EQ(send.deps, (std::vector<int>{static_cast<int>(n)}));
  EXPECT_EQ(send.partner, static_cast<int>(n) + 2);
  EXPECT_EQ(two->collectives[1].members[0], static_cast<int>(n) + 4);
  EXPECT_EQ(two->instrs[n + 4].collective, 1);
  EXPECT_EQ(two->rank_order[0].size(), 2 * g.rank_order[0].size());
  // Peaks count each step's own tensors while it runs.
  auto r = Simulate(*two, TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ranks[0].persistent_bytes, 64);
  EXPECT_EQ(r->ranks[0].peak_bytes, 64 + 32);
}

TEST(RepeatSteps, RefusesNoStepsAndAGraphRepeatedAlready) {
  GraphBuilder b = HandOff();
  EXPECT_EQ(RepeatSteps(b.graph(), 0).status().message(), "steps must be at least 1, got 0");
  auto two = RepeatSteps(b.graph(), 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(RepeatSteps(*two, 2).status().message(), "the graph already holds 2 steps");
}

TEST(RepeatSteps, SimulatorReportsTheSteadyStep) {
  // Through Simulator::Run: the steady step is reported beside the first.
  Module m =
      OneRank({MakeProgram("fwd", "forward", 0, {F32("x", 4), F32("y", 4)}, {Scale("x", "y")})},
              {MakeJob(JobKind::kForward, 0, 0, "fwd")});
  SimOptions options;
  options.steps = 3;
  options.record_timeline = false;
  auto r = SimulateModule(m, nullptr, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->steady_steps, 3);
  // One rank, one 4 ms op: each step takes what the first did.
  EXPECT_NEAR(r->steady_step_time, r->step_time, 1e-12);
  EXPECT_NEAR(r->step_time, 4e-3, 1e-9);
  EXPECT_EQ(r->CpuInRun(), 0);  // a device without cores to share counts no CPU
  // On one core, the op's 4 ms of core time a step, over the steady steps too.
  DeviceSpec core = TestDevice();
  core.set_cores_per_node(1);
  Simulator on_core(ScaleCostEstimator(m, core), ops::Registry(), options);
  auto c = on_core.Run(m);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->cpu, 4e-3, 1e-9);
  EXPECT_NEAR(c->steady_cpu, 4e-3, 1e-9);
  EXPECT_NEAR(c->CpuInRun(), 4e-3, 1e-9);
}

}  // namespace
}  // namespace pw::cost
