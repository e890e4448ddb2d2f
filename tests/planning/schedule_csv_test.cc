#include "ir/schedule_csv.h"

#include <gtest/gtest.h>

#include "passes/pipeline/p2p_insertion.h"
#include "planning_test_util.h"

namespace pw::pipeline {
namespace {

// Every kind, compute-only and lowered, exports and re-imports identically.
TEST(ScheduleCsv, RoundTripsEveryKind) {
  for (ScheduleKind kind :
       {ScheduleKind::kFThenB, ScheduleKind::k1F1B, ScheduleKind::kEager1F1B,
        ScheduleKind::kInterleaved1F1B, ScheduleKind::kZbH1, ScheduleKind::kZbH2,
        ScheduleKind::kZbV, ScheduleKind::kDualPipeV, ScheduleKind::kZbAuto}) {
    bool two = kind == ScheduleKind::kZbV || kind == ScheduleKind::kDualPipeV ||
               kind == ScheduleKind::kInterleaved1F1B;
    ActionSchedule s = testing::Generate(testing::Spec(kind, 4, 8, two ? 2 : 1));
    for (P2POrder order : {P2POrder::kNaive, P2POrder::kBatched, P2POrder::kTorch}) {
      ActionSchedule variant = s;
      if (order != P2POrder::kNaive || kind == ScheduleKind::kZbV) {
        StatusOr<ActionSchedule> lowered = InsertP2P(s, {order});
        ASSERT_TRUE(lowered.ok()) << lowered.status().message();
        variant = std::move(lowered).value();
      }
      std::string csv = ScheduleToCsv(variant);
      StatusOr<ActionSchedule> back = ParseScheduleCsv(csv);
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_TRUE(*back == variant) << ScheduleKindName(kind);
      EXPECT_EQ(ScheduleToCsv(*back), csv);
    }
  }
}

TEST(ScheduleCsv, EmptyCellsAreIdleAndRoundTrip) {
  const std::string text = "0F0,,0B0\n,1F0,1B0\n";
  StatusOr<ActionSchedule> s = ParseScheduleCsv(text);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ranks[0][1].type, ActionType::kIdle);
  EXPECT_EQ(ScheduleToCsv(*s), text);
  EXPECT_TRUE(ParseScheduleCsv("0F0,0B0\r\n1F0,1B0\r\n").ok());
}

// Rows that are all idle, or empty, at either end: print and parse are inverses (a rank
// whose one action is idle prints as `""`, a rank with no actions as an empty line).
TEST(ScheduleCsv, IdleAndEmptyRankRowsRoundTrip) {
  for (const char* text : {" \n0F0\n,,", "0F0\n\"\"", "\"\"\n0F0\n", "0F0\n\n", "\n0F0",
                           "0F0\n,\n\"\"\n\n", "(0F0;0B0)OVERLAP_F_B\n  \n"}) {
    StatusOr<ActionSchedule> s = ParseScheduleCsv(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status().message();
    const std::string printed = ScheduleToCsv(*s);
    StatusOr<ActionSchedule> back = ParseScheduleCsv(printed);
    ASSERT_TRUE(back.ok()) << printed << ": " << back.status().message();
    EXPECT_TRUE(*back == *s) << "'" << text << "' printed as '" << printed << "'";
    EXPECT_EQ(ScheduleToCsv(*back), printed);
  }
  StatusOr<ActionSchedule> s = ParseScheduleCsv(" \n0F0\n,,");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->num_ranks(), 3);
  EXPECT_EQ(s->ranks[0].size(), 1u);  // one idle cell
  EXPECT_EQ(s->ranks[2].size(), 3u);
  EXPECT_EQ(ScheduleToCsv(*s), "\"\"\n0F0\n,,\n");
  s = ParseScheduleCsv("0F0\n\n");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->num_ranks(), 2);
  EXPECT_TRUE(s->ranks[1].empty());
  EXPECT_EQ(ScheduleToCsv(*s), "0F0\n\n");
}

TEST(ScheduleCsv, ErrorsNameLineAndCell) {
  StatusOr<ActionSchedule> s = ParseScheduleCsv("0F0,0B0\n1F0,1X0\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().rfind("line 2, cell 2: malformed action '1X0'", 0), 0u)
      << s.status().message();
  s = ParseScheduleCsv("0F0,1B0\n1F0,1B0\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("stage 1 runs on rank 0 and on rank 1"), std::string::npos);
  EXPECT_FALSE(ParseScheduleCsv("").ok());
}

}  // namespace
}  // namespace pw::pipeline
