#include <gtest/gtest.h>

#include "ir/action.h"
#include "ir/plan_actions.h"

namespace pw {
namespace {

std::string RoundTrip(const std::string& cell) {
  ActionSchedule s;
  StatusOr<Action> a = ParseAction(cell, s);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? ActionToString(*a, s) : "";
}

TEST(ActionNotation, ParsesAndPrintsEveryForm) {
  for (const char* cell : {"0F1", "12B3", "3I2", "3W2", "1RECV_F0", "2SEND_B3", "1SEND_F0",
                           "0RECV_B7", "(0F7;7B3)OVERLAP_F_B", "(0SEND_F1;0RECV_B0)BATCH_P2P",
                           "0SEND_F3>2", "2RECV_F3<0", "2SEND_B1>0", "0RECV_B1<2"}) {
    EXPECT_EQ(RoundTrip(cell), cell);
  }
}

TEST(ActionNotation, EmptyCellIsIdleAndBlanksAreTrimmed) {
  ActionSchedule s;
  EXPECT_EQ(ParseAction("   ", s)->type, ActionType::kIdle);
  EXPECT_EQ(RoundTrip(" 2F0 "), "2F0");
}

TEST(ActionNotation, FusedActionKeepsItsParts) {
  ActionSchedule s;
  Action a = *ParseAction("(0F7;7B3)OVERLAP_F_B", s);
  ASSERT_EQ(a.type, ActionType::kOverlapFB);
  auto parts = s.Parts(a);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], MakeAction(ActionType::kForward, 0, 7));
  EXPECT_EQ(parts[1], MakeAction(ActionType::kBackward, 7, 3));
}

TEST(ActionNotation, MalformedCellsAreOneLineErrors) {
  ActionSchedule s;
  for (const char* cell : {"X", "0X1", "0F", "F1", "0F1x", "(0F1;0B1", "(0F1)FOO",
                           "(0SEND_F1)OVERLAP_F_B", "0UNSHARD", "0SEND_F1<2"}) {
    StatusOr<Action> a = ParseAction(cell, s);
    ASSERT_FALSE(a.ok()) << cell;
    EXPECT_NE(a.status().message().find("malformed action"), std::string::npos);
    EXPECT_EQ(a.status().message().find('\n'), std::string::npos);
  }
}

TEST(ActionNotation, ActionIsCompact) { EXPECT_LE(sizeof(Action), 8u); }

TEST(PlanConversion, RoundTripsThroughPlan) {
  ActionSchedule s;
  s.ranks.resize(2);
  s.ranks[0] = {MakeAction(ActionType::kForward, 0, 0), MakeAction(ActionType::kSendF, 0, 0),
                MakeAction(ActionType::kRecvB, 0, 0), MakeAction(ActionType::kBackward, 0, 0)};
  Action parts[2] = {MakeAction(ActionType::kForward, 1, 0),
                     MakeAction(ActionType::kBackwardInput, 1, 0)};
  s.ranks[1] = {MakeAction(ActionType::kRecvF, 1, 0), s.AddGroup(ActionType::kOverlapFB, parts),
                MakeAction(ActionType::kSendB, 1, 0),
                MakeAction(ActionType::kBackwardWeight, 1, 0)};
  s.num_stages = 2;
  s.num_micro_batches = 1;
  s.stage_to_rank = {0, 1};
  Plan plan = ActionScheduleToPlan(s, "custom");
  EXPECT_EQ(plan.ranks[0].jobs[1].peer, 1);
  EXPECT_EQ(JobToString(plan.ranks[1].jobs[1]), "(1F0;1I0)OVERLAP_F_B");
  StatusOr<ActionSchedule> back = PlanToActionSchedule(plan);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == s);
}

// On a module whose backward is split, a full backward B (alone or inside OVERLAP_F_B)
// names no program and runs the stage's I and W as sub-jobs; the plan converts back to
// the same schedule, B staying B.
TEST(PlanConversion, SplitBackwardRunsIAndWAndStaysB) {
  ActionSchedule s;
  s.ranks.resize(1);
  Action parts[2] = {MakeAction(ActionType::kForward, 0, 1),
                     MakeAction(ActionType::kBackward, 1, 0)};
  s.ranks[0] = {
      MakeAction(ActionType::kForward, 0, 0),        MakeAction(ActionType::kForward, 1, 0),
      s.AddGroup(ActionType::kOverlapFB, parts),     MakeAction(ActionType::kForward, 1, 1),
      MakeAction(ActionType::kBackwardInput, 1, 1),  MakeAction(ActionType::kBackward, 0, 0),
      MakeAction(ActionType::kBackwardWeight, 1, 1), MakeAction(ActionType::kBackward, 0, 1)};
  s.num_stages = 2;
  s.num_micro_batches = 2;
  s.stage_to_rank = {0, 0};
  PlanNaming naming;
  naming.split_backward = true;
  naming.program = [](JobKind kind, int stage) {
    const char* k = kind == JobKind::kForward          ? "forward"
                    : kind == JobKind::kBackwardInput  ? "backward_input"
                    : kind == JobKind::kBackwardWeight ? "backward_weight"
                                                       : "";
    return *k ? StrCat("stage", stage, "_", k) : std::string();
  };
  Plan plan = ActionScheduleToPlan(s, "dualpipe-v", naming);
  const std::vector<Job>& jobs = plan.ranks[0].jobs;
  ASSERT_EQ(jobs.size(), 8u);
  const Job& b = jobs[5];
  EXPECT_EQ(JobToString(b), "0B0");
  EXPECT_EQ(b.program, "");
  ASSERT_EQ(b.sub_jobs.size(), 2u);
  EXPECT_EQ(b.sub_jobs[0].kind, JobKind::kBackwardInput);
  EXPECT_EQ(b.sub_jobs[0].program, "stage0_backward_input");
  EXPECT_EQ(b.sub_jobs[0].micro_batch, 0);
  EXPECT_EQ(b.sub_jobs[1].kind, JobKind::kBackwardWeight);
  EXPECT_EQ(b.sub_jobs[1].program, "stage0_backward_weight");
  EXPECT_EQ(JobToString(jobs[2]), "(0F1;1B0)OVERLAP_F_B");
  EXPECT_EQ(jobs[2].sub_jobs[1].sub_jobs.size(), 2u);
  EXPECT_EQ(jobs[4].program, "stage1_backward_input");  // a scheduled I stays one job

  // What runs: F, I and W jobs only, the split B's I directly followed by its W.
  std::vector<const Job*> flat;
  FlattenJobs(jobs, flat);
  std::vector<std::string> names;
  for (const Job* j : flat) names.push_back(JobToString(*j) + ":" + j->program);
  EXPECT_EQ(names,
            (std::vector<std::string>{"0F0:stage0_forward", "1F0:stage1_forward",
                                      "0F1:stage0_forward", "1I0:stage1_backward_input",
                                      "1W0:stage1_backward_weight", "1F1:stage1_forward",
                                      "1I1:stage1_backward_input", "0I0:stage0_backward_input",
                                      "0W0:stage0_backward_weight", "1W1:stage1_backward_weight",
                                      "0I1:stage0_backward_input", "0W1:stage0_backward_weight"}));

  StatusOr<ActionSchedule> back = PlanToActionSchedule(plan);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == s);

  // Without split_backward the same schedule names the backward program.
  naming.split_backward = false;
  naming.program = [](JobKind, int) { return std::string("p"); };
  Plan whole = ActionScheduleToPlan(s, "dualpipe-v", naming);
  EXPECT_EQ(whole.ranks[0].jobs[5].program, "p");
  EXPECT_TRUE(whole.ranks[0].jobs[5].sub_jobs.empty());
}

TEST(PlanConversion, MisshapenSplitBackwardIsRefused) {
  Job b{JobKind::kBackward, 0, 0, ""};
  b.sub_jobs = {Job{JobKind::kBackwardInput, 0, 0, "i"}, Job{JobKind::kBackwardWeight, 0, 0, "w"}};
  Plan plan;
  plan.ranks = {RankPlan{0, {Job{JobKind::kForward, 0, 0, "f"}, b}}};
  ASSERT_TRUE(PlanToActionSchedule(plan).ok());
  auto refused = [&](const std::string& why) {
    StatusOr<ActionSchedule> s = PlanToActionSchedule(plan);
    if (s.ok()) return std::string("accepted");
    return s.status().message().find(why) != std::string::npos ? std::string()
                                                               : s.status().message();
  };
  plan.ranks[0].jobs[1].sub_jobs.pop_back();
  EXPECT_EQ(refused("rank 0: job 0B0 has sub-jobs other than an I and then a W"), "");
  plan.ranks[0].jobs[1] = b;
  plan.ranks[0].jobs[1].sub_jobs[0].stage = 1;
  EXPECT_EQ(refused("sub-job 1I0 is not a plain job of its stage and micro-batch"), "");
  plan.ranks[0].jobs[1] = b;
  plan.ranks[0].jobs[1].program = "b";
  EXPECT_EQ(refused("has sub-jobs and names program 'b'"), "");
  plan.ranks[0].jobs[0].sub_jobs = b.sub_jobs;
  plan.ranks[0].jobs[1] = b;
  EXPECT_EQ(refused("job 0F0 has sub-jobs"), "");
}

}  // namespace
}  // namespace pw
