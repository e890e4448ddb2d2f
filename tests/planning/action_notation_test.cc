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

}  // namespace
}  // namespace pw
