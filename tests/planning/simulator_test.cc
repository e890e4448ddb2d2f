#include <gtest/gtest.h>

#include "ir/schedule_csv.h"
#include "passes/pipeline/p2p_insertion.h"
#include "planning_test_util.h"
#include "simulator/action_simulator.h"

namespace pw {
namespace {

using pipeline::testing::Generate;
using pipeline::testing::Spec;

// The replay may run before the structure rules (the checker runs them side by side), so
// an action outside the schedule's frame is an error, not a read past a table.
TEST(Timed, StopsAtActionsOutsideTheSchedule) {
  StatusOr<ActionSchedule> base =
      ParseScheduleCsv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  ASSERT_TRUE(base.ok());
  const std::string outside =
      "names a stage, micro-batch, edge or fused group the schedule does not have";
  auto replay = [&](int rank, int index, Action a) {
    ActionSchedule s = *base;
    s.ranks[rank][index] = a;
    for (CommSemantics semantics : {CommSemantics::kEager, CommSemantics::kRendezvous}) {
      SimulationOptions options;
      options.semantics = semantics;
      StatusOr<TimedResult> timed = SimulateTimed(s, options);
      EXPECT_FALSE(timed.ok());
      EXPECT_EQ(timed.status().message(), CheckDeadlockFree(s, semantics).message());
      if (!timed.ok())
        EXPECT_NE(timed.status().message().find(outside), std::string::npos)
            << timed.status().message();
    }
  };
  replay(0, 0, MakeAction(ActionType::kForward, 2, 0));   // no stage 2
  replay(0, 0, MakeAction(ActionType::kForward, -1, 0));  // negative stage
  replay(0, 0, MakeAction(ActionType::kForward, 0, 1));   // no micro-batch 1
  replay(1, 3, MakeAction(ActionType::kSendB, 0, 0));     // stage 0 has no previous stage
  replay(0, 1, MakeAction(ActionType::kSendF, 1, 0));     // the last stage has no next one
  replay(0, 1, MakeAction(ActionType::kSendF, 0, 0, 7));  // no edge 0 -> 7
  Action fused = MakeAction(ActionType::kOverlapFB, 0, 0);
  fused.micro_batch = 3;  // no fused group 3
  replay(0, 0, fused);
  ActionSchedule misplaced = *base;
  misplaced.stage_to_rank = {0, 5};
  EXPECT_EQ(SimulateTimed(misplaced, {}).status().message(),
            "stage 1 is placed on rank 5 but there are 2 ranks");
}

TEST(UnitSteps, PrintsPyTorchsTable) {
  StatusOr<ActionSchedule> s =
      ParseScheduleCsv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  ASSERT_TRUE(s.ok());
  StatusOr<UnitStepResult> r = SimulateUnitSteps(*s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->num_steps, 6);
  EXPECT_EQ(FormatStepTable(*r, *s),
            "        Rank 0   Rank 1  \n"
            "Step 0: 0F0              \n"
            "Step 1: 0SEND_F0 1RECV_F0\n"
            "Step 2:          1F0     \n"
            "Step 3:          1B0     \n"
            "Step 4: 0RECV_B0 1SEND_B0\n"
            "Step 5: 0B0              \n");  // zip_longest pads the finished rank
}

TEST(Timed, ReportsBusyIdleAndPeakActivations) {
  ActionSchedule s = Generate(Spec(pipeline::ScheduleKind::k1F1B, 4, 8));
  SimulationOptions options;
  options.costs.comm = 0.5;
  StatusOr<TimedResult> r = SimulateTimed(s, options);
  ASSERT_TRUE(r.ok());
  SimulationOptions no_comm;
  EXPECT_DOUBLE_EQ(SimulateTimed(s, no_comm)->makespan, 8 * 3 + 3 * 3);
  EXPECT_GT(r->makespan, 8 * 3 + 3 * 3 + 6 * 0.5);  // latency on every cross-rank edge
  ASSERT_EQ(r->ranks.size(), 4u);
  EXPECT_DOUBLE_EQ(r->ranks[0].busy, 24);
  EXPECT_DOUBLE_EQ(r->ranks[0].peak_activations, 4);  // 1F1B: P M_B on the first stage
  EXPECT_DOUBLE_EQ(r->ranks[3].peak_activations, 1);
  // The same with explicit sends and recvs.
  StatusOr<ActionSchedule> lowered = pipeline::InsertP2P(s, {pipeline::P2POrder::kNaive});
  StatusOr<TimedResult> r2 = SimulateTimed(*lowered, options);
  ASSERT_TRUE(r2.ok());
  EXPECT_DOUBLE_EQ(r2->makespan, r->makespan);
}

TEST(Timed, RecordsATimelinePerAction) {
  ActionSchedule s = Generate(Spec(pipeline::ScheduleKind::kFThenB, 2, 2));
  SimulationOptions options;
  options.record_timeline = true;
  StatusOr<TimedResult> r = SimulateTimed(s, options);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->timeline[1].size(), 4u);
  EXPECT_DOUBLE_EQ(r->timeline[1][0].start, 1);  // 1F0 waits for 0F0
  EXPECT_DOUBLE_EQ(r->timeline[1][2].end, 5);    // 1B0 = B + W = 2
}

}  // namespace
}  // namespace pw
