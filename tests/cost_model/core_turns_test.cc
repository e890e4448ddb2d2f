// Cores taken in turns (simulator/core_turns.h): whole cores to the threads that hold them
// until they block or their slice ends while another waits, the rest queued in the order
// they became runnable; and the engine with it, whose pairs of ranks fall out of step where
// even sharing keeps them in it.

#include "simulator/core_turns.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace pw::cost {
namespace {

using Claim = CoreTurns::Claim;

TEST(TurnSlice, IsTheKernelsBaseSliceScaledByTheCores) {
  EXPECT_DOUBLE_EQ(TurnSlice(1), 0.75e-3);
  EXPECT_DOUBLE_EQ(TurnSlice(2), 1.5e-3);
  EXPECT_DOUBLE_EQ(TurnSlice(3), 1.5e-3);
  EXPECT_DOUBLE_EQ(TurnSlice(8), 3e-3);
  EXPECT_DOUBLE_EQ(TurnSlice(64), 3e-3);  // the kernel scales by 8 CPUs at most
}

TEST(CoreTurns, WholeCoresGoToTheThreadsRunnableFirst) {
  CoreTurns turns(3, 2);
  // Rank 2 became runnable first, then rank 0; rank 1 waits.
  const std::vector<double> granted =
      turns.Grant(0.0, {2.0}, {{0, 0, 1, 0.2e-3}, {1, 0, 1, 0.3e-3}, {2, 0, 1, 0.1e-3}});
  EXPECT_EQ(granted, (std::vector<double>{1, 0, 1}));
  // The turn rank 2 holds ends first: at its slice, 1.5 ms after it began.
  EXPECT_DOUBLE_EQ(turns.NextTurnEnd(), 1.5e-3);
}

TEST(CoreTurns, AThreadKeepsItsCoreUntilItBlocks) {
  CoreTurns turns(2, 1);
  EXPECT_EQ(turns.Grant(0.0, {1.0}, {{0, 0, 1, 0.0}}), (std::vector<double>{1}));
  // Rank 1 becomes runnable; rank 0 runs its next op within its turn and keeps the core.
  EXPECT_EQ(turns.Grant(0.1e-3, {1.0}, {{0, 0, 1, 0.1e-3}, {1, 0, 1, 0.05e-3}}),
            (std::vector<double>{1, 0}));
  // Rank 0 blocks (no claim): rank 1 takes the core, and keeps it when rank 0 is back.
  EXPECT_EQ(turns.Grant(0.2e-3, {1.0}, {{1, 0, 1, 0.05e-3}}), (std::vector<double>{1}));
  EXPECT_EQ(turns.Grant(0.3e-3, {1.0}, {{0, 0, 1, 0.3e-3}, {1, 0, 1, 0.05e-3}}),
            (std::vector<double>{0, 1}));
}

TEST(CoreTurns, ATurnEndsWithItsSliceWhileAnotherWaits) {
  CoreTurns turns(2, 1);  // a 0.75 ms slice
  turns.Grant(0.0, {1.0}, {{0, 0, 1, 0.0}, {1, 0, 1, 0.0}});
  EXPECT_DOUBLE_EQ(turns.NextTurnEnd(), 0.75e-3);
  EXPECT_EQ(turns.Grant(0.75e-3, {1.0}, {{0, 0, 1, 0.0}, {1, 0, 1, 0.0}}),
            (std::vector<double>{0, 1}));
  EXPECT_DOUBLE_EQ(turns.NextTurnEnd(), 1.5e-3);
  // Alone, a thread keeps its core past the slice: no turn end to wait for.
  CoreTurns alone(1, 1);
  alone.Grant(0.0, {1.0}, {{0, 0, 1, 0.0}});
  EXPECT_EQ(alone.Grant(5e-3, {1.0}, {{0, 0, 1, 0.0}}), (std::vector<double>{1}));
  EXPECT_EQ(alone.NextTurnEnd(), std::numeric_limits<double>::infinity());
}

TEST(CoreTurns, AWakeUpsCpuRunsBeforeTheTurns) {
  CoreTurns turns(3, 1);
  turns.Grant(0.0, {1.0}, {{0, 0, 1, 0.0}});
  // Thread 2's moment of CPU (passing) takes the core from the turn thread 0 holds; thread 1
  // waits behind both. Once it is done, thread 0 is first again.
  EXPECT_EQ(
      turns.Grant(0.1e-3, {1.0}, {{0, 0, 1, 0.0}, {1, 0, 1, 0.05e-3}, {2, 0, 1, 0.1e-3, true}}),
      (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(turns.Grant(0.2e-3, {1.0}, {{0, 0, 1, 0.0}, {1, 0, 1, 0.05e-3}}),
            (std::vector<double>{1, 0}));
}

TEST(CoreTurns, CommunicationLeavesAFractionAtTheMargin) {
  CoreTurns turns(3, 2);
  // 1.5 cores left: the first claim a whole one, the second half, the third none.
  EXPECT_EQ(turns.Grant(0.0, {1.5}, {{0, 0, 1, 0.0}, {1, 0, 1, 1e-6}, {2, 0, 1, 2e-6}}),
            (std::vector<double>{1, 0.5, 0}));
}

TEST(CoreTurns, NodesTakeTurnsApart) {
  CoreTurns turns(4, 1);
  EXPECT_EQ(turns.Grant(0.0, {1.0, 1.0}, {{0, 0, 1, 0.0}, {1, 0, 1, 0.0}, {2, 1, 1, 0.0}}),
            (std::vector<double>{1, 0, 1}));
}

// Two pairs of ranks on 2 cores, each rank computing 100 us and joining its pair's 100 us
// all-reduce, twice. In turns the first pair computes while the second waits, then the
// second computes while the first communicates: 500 us. Shared evenly, all four compute at
// half speed and then all wait in their all-reduces with the cores idle: 600 us.
SimGraph TwoPairs() {
  testing::GraphBuilder b(4);
  for (int round = 0; round < 2; ++round) {
    for (int rank = 0; rank < 4; ++rank) b.Compute(rank, 100e-6);
    b.Collective({0, 1}, 100e-6);
    b.Collective({2, 3}, 100e-6);
  }
  return b.graph();
}

DeviceSpec TwoCores(bool in_turns) {
  DeviceSpec d = testing::TestDevice();
  d.set_cores_per_node(2);
  d.set_cores_in_turns(in_turns);
  return d;
}

TEST(CoreTurnsEngine, PairsFallOutOfStepAndCommunicateWhileTheOthersCompute) {
  SimOptions options;
  const SimGraph graph = TwoPairs();
  StatusOr<SimResult> turns = Simulate(graph, TwoCores(true), options);
  StatusOr<SimResult> even = Simulate(graph, TwoCores(false), options);
  ASSERT_TRUE(turns.ok()) << turns.status().message();
  ASSERT_TRUE(even.ok()) << even.status().message();
  EXPECT_NEAR(turns->step_time, 500e-6, 1e-9);
  EXPECT_NEAR(even->step_time, 600e-6, 1e-9);
  // In turns each op runs at full speed: the second pair's first op ends at 200 us.
  EXPECT_NEAR(turns->timeline[0].end, 100e-6, 1e-9);
  EXPECT_NEAR(turns->timeline[2].end, 200e-6, 1e-9);
  EXPECT_NEAR(even->timeline[2].end, 200e-6, 1e-9);
}

TEST(CoreTurnsEngine, LongOpsTakeTheCoresInSlicesAsEvenSharingDoes) {
  // Three 30 ms ops on two cores: the slices rotate them, 45 ms as shared evenly.
  testing::GraphBuilder b(3);
  for (int rank = 0; rank < 3; ++rank) b.Compute(rank, 30e-3);
  StatusOr<SimResult> r = Simulate(b.graph(), TwoCores(true), SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->step_time, 45e-3, 1.5e-3);  // within a slice
}

TEST(CoreTurnsEngine, AnOpResumedOnAHeldCoreQueuesForItOnce) {
  // One core, two ranks. Rank 0 computes A (100 us), and its mp_comm stream runs M (10 us of
  // compute) after A, seen by its spinning thread a few us later; rank 1 computes L (5 ms)
  // from the start and takes the core when A ends. M, resumed while L holds the core, queues
  // for it in the turns and gets it when L's turn ends with its slice (0.75 ms after it
  // began), at 850 us. A held-core wait as well (held_spin_latency, 2 ms here) would start
  // its queueing late: M would run at 2.1 ms.
  testing::GraphBuilder b(2);
  const int a = b.Compute(0, 100e-6);
  b.Compute(1, 5e-3);
  const int m = b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 10e-6, {a});
  DeviceSpec d = testing::TestDevice();
  d.set_cores_per_node(1);
  d.set_cores_in_turns(true);
  d.set_spin_budget(1);  // M's thread is caught spinning: no wake-up
  d.set_long_spin_budget(1);
  d.set_spin_latency(5e-6);
  d.set_held_spin_latency(2e-3);
  d.set_held_wake_factor(100);
  StatusOr<SimResult> r = Simulate(b.graph(), d, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->timeline[m].active, 850e-6, 1e-9);
  EXPECT_NEAR(r->timeline[m].end, 860e-6, 1e-9);
}

}  // namespace
}  // namespace pw::cost
