#include "passes/pipeline/p2p_insertion.h"

#include <gtest/gtest.h>

#include "passes/pipeline/schedule_checker.h"
#include "planning_test_util.h"

namespace pw::pipeline {
namespace {

using testing::Generate;
using testing::RankActions;
using testing::Spec;

TEST(P2PInsertion, NaiveSendsAfterProducerRecvsBeforeConsumer) {
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 2, 2));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kNaive});
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(RankActions(*lowered, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1");
  EXPECT_EQ(RankActions(*lowered, 1), "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1");
}

TEST(P2PInsertion, ParityPairsNeighboursForBlockingP2P) {
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 2, 2));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kParity});
  ASSERT_TRUE(lowered.ok());
  CheckOptions rendezvous;
  rendezvous.semantics = CommSemantics::kRendezvous;
  EXPECT_TRUE(CheckSchedule(*lowered, rendezvous).ok());
  // The naive order of the same schedule deadlocks when p2p blocks.
  StatusOr<ActionSchedule> naive = InsertP2P(s, {P2POrder::kNaive});
  EXPECT_FALSE(CheckSchedule(*naive, rendezvous).ok());
}

TEST(P2PInsertion, BatchedGroupsEveryGap) {
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 4, 8));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kBatched});
  ASSERT_TRUE(lowered.ok());
  size_t batches = 0;
  for (const auto& rank : lowered->ranks)
    for (const Action& a : rank) batches += a.type == ActionType::kBatchP2P;
  EXPECT_GT(batches, 0u);
  CheckOptions rendezvous;
  rendezvous.semantics = CommSemantics::kRendezvous;
  EXPECT_TRUE(CheckSchedule(*lowered, rendezvous).ok());
}

TEST(P2PInsertion, MegatronExchangesOncePerStepWithoutInterleaving) {
  // Megatron-LM's 1F1B: recv_forward, F, send_forward_recv_backward, B,
  // send_backward_recv_forward, ...: one exchange in each gap.
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 2, 2));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kMegatron});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(RankActions(*lowered, 0),
            "0F0 0SEND_F0 0F1 (0SEND_F1;0RECV_B0)BATCH_P2P 0B0 0RECV_B1 0B1");
  EXPECT_EQ(RankActions(*lowered, 1),
            "1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1");
  CheckOptions rendezvous;
  rendezvous.semantics = CommSemantics::kRendezvous;
  Status checked = CheckSchedule(*lowered, rendezvous);
  EXPECT_TRUE(checked.ok()) << checked.message();
}

TEST(P2PInsertion, MegatronInterleavedSendsAForwardAfterTheBackwardThatFollowsIt) {
  // Two ranks, two chunks each: Megatron's forward_backward_pipelining_with_interleaving
  // runs F then B and one send_forward_backward_recv_forward_backward after both.
  ActionSchedule s = Generate(Spec(ScheduleKind::kInterleaved1F1B, 2, 4, 2));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kMegatron});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  const std::string rank0 = RankActions(*lowered, 0), rank1 = RankActions(*lowered, 1);
  EXPECT_NE(rank0.find("2F2 0B0 (2SEND_F2;2RECV_F3;0RECV_B1)BATCH_P2P"), std::string::npos)
      << rank0;
  EXPECT_NE(rank1.find("1F2 1B0 (1SEND_F2;1SEND_B0;1RECV_F3;1RECV_B1)BATCH_P2P 1F3"),
            std::string::npos)
      << rank1;
  EXPECT_EQ(rank1.rfind("1RECV_F0 1F0 (1SEND_F0;1RECV_F1)BATCH_P2P", 0), 0u) << rank1;
  CheckOptions rendezvous;
  rendezvous.semantics = CommSemantics::kRendezvous;
  // Blocking transfers never deadlock, also where a rank's warm-up holds all its forwards
  // (4 ranks, 4 micro-batches: ranks 0 and 1 have no steady state).
  for (int ranks : {2, 4, 8})
    for (int chunks : {2, 3})
      for (int m = ranks; m <= 4 * ranks; m += ranks) {
        ActionSchedule big = Generate(Spec(ScheduleKind::kInterleaved1F1B, ranks, m, chunks));
        StatusOr<ActionSchedule> placed = InsertP2P(big, {P2POrder::kMegatron});
        ASSERT_TRUE(placed.ok()) << placed.status().message();
        Status checked = CheckSchedule(*placed, rendezvous);
        EXPECT_TRUE(checked.ok()) << ranks << " ranks, " << chunks << " chunks, " << m
                                  << " micro-batches: " << checked.message();
      }
}

TEST(P2PInsertion, MegatronRefusesWhatMegatronDoesNotRun) {
  StatusOr<ActionSchedule> zb =
      InsertP2P(Generate(Spec(ScheduleKind::kZbH1, 4, 8)), {P2POrder::kMegatron});
  ASSERT_FALSE(zb.ok());
  EXPECT_NE(zb.status().message().find("1F1B and interleaved 1F1B"), std::string::npos)
      << zb.status().message();
  ActionSchedule skips = Generate(Spec(ScheduleKind::k1F1B, 4, 4));
  skips.skip_edges = {{0, 3}};
  StatusOr<ActionSchedule> skip = InsertP2P(skips, {P2POrder::kMegatron});
  ASSERT_FALSE(skip.ok());
  EXPECT_NE(skip.status().message().find("skip connections"), std::string::npos);
}

TEST(P2PInsertion, SameRankStagesHandOverWithoutComm) {
  ActionSchedule s = Generate(Spec(ScheduleKind::kZbV, 2, 4, 2));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kNaive});
  ASSERT_TRUE(lowered.ok());
  // Stages 1 and 2 are both on rank 1: no 1SEND_F / 2RECV_F between them.
  EXPECT_EQ(RankActions(*lowered, 1).find("1SEND_F"), std::string::npos);
  EXPECT_EQ(RankActions(*lowered, 1).find("2RECV_F"), std::string::npos);
  EXPECT_TRUE(CheckSchedule(*lowered).ok());
}

TEST(P2PInsertion, SkipEdgesGetTheirOwnSendAndRecv) {
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 4, 4));
  s.skip_edges = {{0, 3}};
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kNaive});
  ASSERT_TRUE(lowered.ok());
  EXPECT_NE(RankActions(*lowered, 0).find("0SEND_F0>3"), std::string::npos);
  EXPECT_NE(RankActions(*lowered, 3).find("3RECV_F0<0"), std::string::npos);
  EXPECT_NE(RankActions(*lowered, 3).find("3SEND_B0>0"), std::string::npos);
  EXPECT_NE(RankActions(*lowered, 0).find("0RECV_B0<3"), std::string::npos);
  Status st = CheckSchedule(*lowered);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(InsertP2P(s, {P2POrder::kTorch}).ok());
}

TEST(P2PInsertion, RejectsALoweredSchedule) {
  ActionSchedule s = Generate(Spec(ScheduleKind::k1F1B, 2, 2));
  StatusOr<ActionSchedule> lowered = InsertP2P(s, {P2POrder::kNaive});
  EXPECT_FALSE(InsertP2P(*lowered, {P2POrder::kNaive}).ok());
  EXPECT_FALSE(ParseP2POrder("random").ok());
  // Large enough that ranks are lowered on several threads.
  s = Generate(Spec(ScheduleKind::k1F1B, 16, 4096));
  lowered = InsertP2P(s, {P2POrder::kNaive});
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(InsertP2P(*lowered, {P2POrder::kNaive}).status().message(),
            "the schedule already has send/recv actions");
}

}  // namespace
}  // namespace pw::pipeline
