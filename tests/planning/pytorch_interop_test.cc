// Against PyTorch's own artifacts (tests/planning/data, from torch's pipelining tests) and
// the small cases of its test_schedule.py, whose expected results are facts about
// PyTorch's behaviour.

#include <gtest/gtest.h>

#include "ir/schedule_csv.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "planning_test_util.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {
namespace {

using testing::DataPath;
using testing::RankActions;

ActionSchedule Read(const std::string& name) {
  StatusOr<ActionSchedule> s = ReadScheduleCsv(DataPath(name));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : ActionSchedule{};
}

ActionSchedule FromRows(const std::vector<std::string>& rows) {
  std::string text;
  for (const std::string& row : rows) text += row + "\n";
  StatusOr<ActionSchedule> s = ParseScheduleCsv(text);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : ActionSchedule{};
}

TEST(PyTorchInterop, ZeroBubbleComputeCsvLowersToPyTorchsCommsCsv) {
  ActionSchedule compute = Read("zb1p_2rank_2stagep_compute.csv");
  EXPECT_EQ(compute.num_stages, 4);
  EXPECT_EQ(compute.num_micro_batches, 8);
  EXPECT_EQ(compute.stage_to_rank, (std::vector<int>{0, 1, 0, 1}));
  ASSERT_TRUE(CheckSchedule(compute).ok());
  // PyTorch's test_csv_compare lowers it as _add_send_recv(_merge_bw(compute)).
  StatusOr<ActionSchedule> lowered =
      InsertP2P(compute, {P2POrder::kTorch, /*merge_backward=*/true});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  ActionSchedule expected = Read("zb1p_2rank_2stagep_comms.csv");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(RankActions(*lowered, r), RankActions(expected, r));
  EXPECT_EQ(ScheduleToCsv(*lowered), ScheduleToCsv(expected));
  EXPECT_TRUE(CheckSchedule(*lowered).ok());
  StatusOr<UnitStepResult> steps = SimulateUnitSteps(*lowered);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  EXPECT_EQ(steps->num_steps, 113);  // PyTorch's test_csv
}

TEST(PyTorchInterop, ZbH1WithTwoChunksIsPyTorchsZb1p) {
  ScheduleSpec spec = testing::Spec(ScheduleKind::kZbH1, 2, 8, 2);
  ActionSchedule generated = testing::Generate(spec);
  ActionSchedule artifact = Read("zb1p_2rank_2stagep_compute.csv");
  for (auto& actions : artifact.ranks)
    std::erase_if(actions, [](const Action& a) { return a.type == ActionType::kIdle; });
  EXPECT_TRUE(generated == artifact);
}

TEST(PyTorchInterop, DualPipeVCsvReadsChecksAndSimulates) {
  ActionSchedule s = Read("dualpipev_4rank_10mb.csv");
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.num_micro_batches, 10);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  Status checked = CheckSchedule(s);
  ASSERT_TRUE(checked.ok()) << checked.message();
  SimulationOptions options;
  StatusOr<TimedResult> timed = SimulateTimed(s, options);
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  EXPECT_GT(timed->makespan, 0);
  StatusOr<UnitStepResult> steps = SimulateUnitSteps(s);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  // Lowered the PyTorch way, it still checks and runs.
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kTorch});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_TRUE(CheckSchedule(*lowered).ok());
  EXPECT_TRUE(SimulateUnitSteps(*lowered).ok());
}

TEST(PyTorchInterop, DualPipeVGeneratorIsPyTorchsSchedule) {
  ActionSchedule generated = testing::Generate(testing::Spec(ScheduleKind::kDualPipeV, 4, 10, 2));
  EXPECT_EQ(ScheduleToCsv(generated), ScheduleToCsv(Read("dualpipev_4rank_10mb.csv")));
}

// PyTorch's test_send_recv cases: the lowering and the simulated step counts.
TEST(PyTorchInterop, SendRecvSimpleTwoRanks) {
  ActionSchedule compute = FromRows({"0F0,0F1,   ,0B0,   ,0B1", "   ,1F0,1B0,1F1,1B1,   "});
  P2POptions options{P2POrder::kTorch, /*merge_backward=*/false};
  StatusOr<ActionSchedule> lowered = InsertP2P(compute, options);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(RankActions(*lowered, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1");
  EXPECT_EQ(RankActions(*lowered, 1), "1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1");
  EXPECT_EQ(SimulateUnitSteps(*lowered)->num_steps, 11);
}

TEST(PyTorchInterop, SendRecvVShapeTwoRanksFourStages) {
  ActionSchedule compute = FromRows({"0F0,0F1,   ,3F0,3B0,3F1,3B1,0B0,3W0,0B1,3W1,0W0,0W1",
                                     "   ,1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1,2W0,2W1,1W0,1W1"});
  EXPECT_EQ(compute.stage_to_rank, (std::vector<int>{0, 1, 1, 0}));
  P2POptions options{P2POrder::kTorch, /*merge_backward=*/false};
  StatusOr<ActionSchedule> lowered = InsertP2P(compute, options);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(RankActions(*lowered, 0),
            "0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 3F0 3B0 3SEND_B0 3RECV_F1 3F1 3B1 3SEND_B1 "
            "0RECV_B0 0B0 3W0 0RECV_B1 0B1 3W1 0W0 0W1");
  EXPECT_EQ(RankActions(*lowered, 1),
            "1RECV_F0 1RECV_F1 1F0 2F0 2SEND_F0 1F1 2RECV_B0 2F1 2SEND_F1 2B0 2RECV_B1 1B0 "
            "1SEND_B0 2B1 1B1 1SEND_B1 2W0 2W1 1W0 1W1");
  EXPECT_EQ(SimulateUnitSteps(*lowered)->num_steps, 24);
}

TEST(PyTorchInterop, MergeBackwardFusesAdjacentIAndW) {
  ActionSchedule compute = FromRows({"0F0,0F1,0F2,0I0,0I1,0W0,0I2,0W2,0W1"});
  EXPECT_EQ(RankActions(MergeBackward(compute), 0), "0F0 0F1 0F2 0I0 0I1 0W0 0B2 0W1");
}

}  // namespace
}  // namespace pw::pipeline
