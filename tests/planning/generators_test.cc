#include <gtest/gtest.h>

#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "planning_test_util.h"

namespace pw::pipeline {
namespace {

using testing::Generate;
using testing::RankActions;
using testing::Spec;

TEST(Generators, OneFOneBKnownOrder) {
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 4, 8));
  EXPECT_EQ(RankActions(s, 0), "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7");
  EXPECT_EQ(RankActions(s, 3), "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7");
}

TEST(Generators, FThenBKnownOrder) {
  ActionSchedule s = Generate(Spec(ScheduleKind::kFThenB, 2, 3));
  EXPECT_EQ(RankActions(s, 1), "1F0 1F1 1F2 1B0 1B1 1B2");
}

TEST(Generators, EagerOneFOneBWarmsUpTwiceAsDeep) {
  ActionSchedule s = Generate(Spec(ScheduleKind::kEager1F1B, 4, 8));
  // Stage s runs min(M, 2(P-s)-1) forwards before its first backward.
  for (int r = 0; r < 4; ++r) {
    int forwards = 0;
    for (const Action& a : s.ranks[r]) {
      if (a.type != ActionType::kForward) break;
      ++forwards;
    }
    EXPECT_EQ(forwards, std::min(8, 2 * (4 - r) - 1)) << "rank " << r;
  }
}

TEST(Generators, InterleavedVisitsChunksInRounds) {
  ActionSchedule s = Generate(Spec(ScheduleKind::kInterleaved1F1B, 2, 4, 2));
  // Rank 0 holds stages 0 and 2; warm-up (V-1)P + 2(P-1-r) = 4 forwards.
  EXPECT_EQ(RankActions(s, 0), "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
}

TEST(Generators, ZbH1DefersTheFirstRWeightSteps) {
  ActionSchedule s = Generate(Spec(ScheduleKind::kZbH1, 2, 2));
  EXPECT_EQ(RankActions(s, 0), "0F0 0F1 0I0 0W0 0I1 0W1");
  EXPECT_EQ(RankActions(s, 1), "1F0 1I0 1F1 1I1 1W0 1W1");
}

// Every kind on a grid of ranks, micro-batches and chunks passes the checker, compute-only
// and after every p2p order (each under the semantics it is designed for).
TEST(Generators, EveryKindPassesTheChecker) {
  struct Case {
    ScheduleKind kind;
    int chunks;
  };
  const Case cases[] = {{ScheduleKind::kFThenB, 1},
                        {ScheduleKind::kFThenB, 2},
                        {ScheduleKind::k1F1B, 1},
                        {ScheduleKind::kEager1F1B, 1},
                        {ScheduleKind::kInterleaved1F1B, 1},
                        {ScheduleKind::kInterleaved1F1B, 2},
                        {ScheduleKind::kInterleaved1F1B, 3},
                        {ScheduleKind::kZbH1, 1},
                        {ScheduleKind::kZbH1, 2},
                        {ScheduleKind::kZbH2, 1},
                        {ScheduleKind::kZbV, 2},
                        {ScheduleKind::kDualPipeV, 2},
                        {ScheduleKind::kZbAuto, 1},
                        {ScheduleKind::kZbAuto, 2}};
  for (const Case& c : cases)
    for (int P : {1, 2, 3, 4, 8})
      for (int M : {1, 2, 3, 4, 5, 8, 12, 16}) {
        ScheduleSpec spec = Spec(c.kind, P, M, c.chunks);
        if (!Validate(spec).ok()) continue;  // constraints are tested on their own
        SCOPED_TRACE(::testing::Message()
                     << ScheduleKindName(c.kind) << " P=" << P << " M=" << M << " V=" << c.chunks);
        StatusOr<ActionSchedule> s = GenerateSchedule(spec);
        ASSERT_TRUE(s.ok()) << s.status().message();
        Status checked = CheckSchedule(*s);
        ASSERT_TRUE(checked.ok()) << checked.message();
        for (P2POrder order :
             {P2POrder::kNaive, P2POrder::kParity, P2POrder::kBatched, P2POrder::kTorch}) {
          StatusOr<ActionSchedule> lowered = InsertP2P(*s, {order});
          ASSERT_TRUE(lowered.ok()) << P2POrderName(order) << ": " << lowered.status().message();
          CheckOptions options;
          options.semantics = DesignedSemantics(order);
          Status st = CheckSchedule(*lowered, options);
          EXPECT_TRUE(st.ok()) << P2POrderName(order) << ": " << st.message();
        }
      }
}

TEST(Generators, ConstraintsAreOneLineErrors) {
  auto error = [](ScheduleSpec spec) {
    Status st = Validate(spec);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
    return st.message();
  };
  EXPECT_EQ(error(Spec(ScheduleKind::k1F1B, 4, 3)),
            "1f1b needs at least as many micro-batches as ranks (3 < 4)");
  EXPECT_NE(error(Spec(ScheduleKind::kInterleaved1F1B, 4, 6, 2)).find("multiple of the ranks"),
            std::string::npos);
  EXPECT_NE(error(Spec(ScheduleKind::kZbV, 4, 8, 1)).find("two stages per rank"),
            std::string::npos);
  EXPECT_NE(error(Spec(ScheduleKind::kDualPipeV, 4, 6, 2)).find("at least as many"),
            std::string::npos);
  EXPECT_FALSE(ParseScheduleKind("gpipe").ok());
}

}  // namespace
}  // namespace pw::pipeline
