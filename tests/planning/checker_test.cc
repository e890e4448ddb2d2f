// Hand-made broken schedules: each is caught with a message naming what is wrong.

#include <gtest/gtest.h>

#include "ir/schedule_csv.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "planning_test_util.h"

namespace pw::pipeline {
namespace {

std::string CheckRows(const std::string& csv, CommSemantics semantics = CommSemantics::kEager) {
  StatusOr<ActionSchedule> s = ParseScheduleCsv(csv);
  if (!s.ok()) return s.status().message();
  CheckOptions options;
  options.semantics = semantics;
  Status st = CheckSchedule(*s, options);
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  return st.ok() ? "ok" : st.message();
}

TEST(Checker, AcceptsAValidSchedule) {
  EXPECT_EQ(CheckRows("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"), "ok");
}

TEST(Checker, DeadlockNamesTheCycle) {
  // Rank 0 waits for rank 1's gradient before sending it the activation it needs.
  EXPECT_EQ(CheckRows("0F0,0RECV_B0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"),
            "deadlock: rank 0 waits at 0RECV_B0 for 1SEND_B0 on rank 1, rank 1 waits at "
            "1RECV_F0 for 0SEND_F0 on rank 0 (cycle)");
  // Compute-only: each rank wants the other's micro-batch first.
  EXPECT_EQ(CheckRows("0F0,0F1,0B1,0B0\n1F0,1B0,1F1,1B1\n"), "ok");
  EXPECT_EQ(CheckRows("0F1,0F0,0B0,0B1\n1F0,1B0,1F1,1B1\n", CommSemantics::kEager), "ok");
  EXPECT_EQ(CheckRows("0F0,0B1,0F1,0B0\n1F1,1B1,1F0,1B0\n"),
            "rank 0, action 1 (0B1): B before the forward 0F1");
  EXPECT_EQ(CheckRows("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n"),
            "deadlock: rank 0 waits at 0B0 for 1B0 on rank 1, rank 1 waits at 1F1 for 0F1 on "
            "rank 0 (cycle)");
}

TEST(Checker, RendezvousDeadlockOfNaiveOneFOneB) {
  const std::string naive =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";
  EXPECT_EQ(CheckRows(naive, CommSemantics::kEager), "ok");
  EXPECT_EQ(CheckRows(naive, CommSemantics::kRendezvous),
            "deadlock: rank 0 waits at 0SEND_F1 for 1RECV_F1 on rank 1, rank 1 waits at "
            "1SEND_B0 for 0RECV_B0 on rank 0 (cycle)");
}

TEST(Checker, IncompleteSchedules) {
  EXPECT_EQ(CheckRows("0F0,0F1,0B0,0B1\n1F0,1B0\n"), "incomplete: rank 1 never runs 1F1");
  EXPECT_EQ(CheckRows("0F0,0B0\n1F0,1I0\n"), "incomplete: rank 1 runs 1I0 but never 1W0");
  EXPECT_EQ(CheckRows("0F0,0B0\n1F0\n"),
            "incomplete: rank 1 never runs a backward (1B0, or 1I0 and 1W0)");
  EXPECT_EQ(CheckRows("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n"),
            "rank 1, action 0 (1F0): runs before receiving its input (no 1RECV_F0 before it)");
  EXPECT_EQ(CheckRows("0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"),
            "rank 0, action 2 (0SEND_F0): appears twice");
  EXPECT_EQ(CheckRows("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0\n"),
            "incomplete: 0RECV_B0 on rank 0 has no matching 1SEND_B0 on rank 1");
  EXPECT_EQ(CheckRows("0F0,0B0,0W0\n"),
            "rank 0, action 2 (0W0): W after a full backward B (which already computed it)");
  EXPECT_EQ(CheckRows("0F0,0F1,1F0,1B0,0B0,0SEND_B1\n"),
            "rank 0, action 5 (0SEND_B1): names no data edge between stages");
}

TEST(Checker, InconsistentRanksAreNamed) {
  StatusOr<ActionSchedule> s = ParseScheduleCsv("0F0,0B0\n1F0,1B0\n");
  ASSERT_TRUE(s.ok());
  s->stage_to_rank = {0, 0};
  Status st = CheckSchedule(*s);
  EXPECT_EQ(st.message(),
            "rank 1, action 0 (1F0): inconsistent ranks: stage 1 is placed on rank 0");
}

TEST(Checker, IndicesBeyondTheActionsAreRefusedWhenRead) {
  // Found by the schedule CSV fuzzer: one action of micro-batch 8001107 made the checker
  // size its tables by it (2 GB). No stage or micro-batch can pass the number of actions.
  StatusOr<ActionSchedule> s = ParseScheduleCsv("0F0,0RECV_B8001107,0B0\n1F0,1B0\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "micro-batch 8001107 in a schedule of 5 actions: stages and micro-batches are "
            "numbered from 0 without gaps");
  s = ParseScheduleCsv("0F0,0B0\n900F0,900B0\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "stage 900 in a schedule of 4 actions: stages and micro-batches are numbered from 0 "
            "without gaps");
}

TEST(Checker, MemoryLimit) {
  StatusOr<ActionSchedule> s = ParseScheduleCsv("0F0,0F1,0F2,0B0,0B1,0B2\n");
  CheckOptions options;
  options.mem_limit = 2;
  EXPECT_EQ(CheckSchedule(*s, options).message(),
            "rank 0 holds up to 3 M_B of activations, over the memory limit 2");
}

// Large schedules run the structure rules beside the replay: the result is the one the
// rules and the replay give one after the other, and a broken rule still wins.
TEST(Checker, LargeScheduleChecksBesideTheReplay) {
  StatusOr<ActionSchedule> compute = GenerateSchedule(testing::Spec(ScheduleKind::k1F1B, 16, 2048));
  ASSERT_TRUE(compute.ok());
  StatusOr<ActionSchedule> lowered = InsertP2P(*compute, {P2POrder::kNaive});
  ASSERT_TRUE(lowered.ok());
  ASSERT_GT(lowered->num_actions(), 100000u);
  StatusOr<TimedResult> both = CheckAndSimulate(*lowered, {}, {});
  ASSERT_TRUE(both.ok()) << both.status().message();
  ASSERT_TRUE(CheckStructure(*lowered).ok());
  StatusOr<TimedResult> alone = SimulateTimed(*lowered, {});
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(both->makespan, alone->makespan);
  EXPECT_EQ(both->bubble_rate, alone->bubble_rate);
  EXPECT_TRUE(CheckSchedule(*lowered).ok());

  // A second forward late on the last rank; the replay alone would only see a recv gone.
  ActionSchedule broken = *lowered;
  auto& last = broken.ranks.back();
  last[last.size() - 2] = MakeAction(ActionType::kForward, 15, 7);
  const std::string expected = CheckStructure(broken).message();
  EXPECT_NE(expected.find("second forward of stage 15 micro-batch 7"), std::string::npos);
  EXPECT_EQ(CheckAndSimulate(broken, {}, {}).status().message(), expected);
  EXPECT_EQ(CheckSchedule(broken).message(), expected);

  // Out of every table: the replay stops at it instead of reading past its tables.
  broken = *lowered;
  broken.ranks[3][1000] = MakeAction(ActionType::kSendF, 3, 5000);
  EXPECT_EQ(CheckAndSimulate(broken, {}, {}).status().message(), CheckStructure(broken).message());
  EXPECT_NE(CheckSchedule(broken).message().find("micro-batch 5000 out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace pw::pipeline
