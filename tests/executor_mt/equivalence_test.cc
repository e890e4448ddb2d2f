// The invariant from DESIGN.md on the executor side: a layout with more ranks computes
// what the single-rank program computes. Ranks run as threads (in-process transport), so
// these stay fast; tests/executor_mt/launcher_test.cc repeats some over Gloo processes.
//
// Model: GPT, 4 layers, hidden 64, 4 heads, seq 16, vocab 128, micro-batch size 2; 8
// micro-batches per step; 3 steps; SGD at lr 0.1 (the loss falls within the 3 steps).

#include <gtest/gtest.h>

#include "equivalence_util.h"
#include "executor/plan_check.h"
#include "executor/reference_runner.h"
#include "models/gpt.h"
#include "models/unet.h"
#include "ops/kernel.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 3;
constexpr int kMicroBatches = 8;
constexpr uint64_t kSeed = 1;
constexpr const char* kTraining = "append-backward{optimizer=sgd,lr=0.1}";

Module Gpt(int mp, int pp = 1, int dp = 1) {
  models::GptConfig c = SmallGptConfig(mp, pp);
  auto built = models::BuildGpt(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  m.mesh.dp = dp;
  auto trained = WithPasses(std::move(m), kTraining);
  EXPECT_TRUE(trained.ok()) << trained.status().ToString();
  return std::move(trained).value();
}

// The single-rank executor run everything else is compared with, checked once against
// the reference runner.
const ThreadRun& Baseline() {
  static const ThreadRun run = [] {
    auto r = RunAsThreads(Gpt(1), kSteps, kMicroBatches, kSeed);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ThreadRun{};
  }();
  return run;
}

void ExpectSameTraining(const Module& module, const ThreadRun& run, Match match) {
  ExpectSameTraining(module, run, Gpt(1), Baseline(), match);
}

// Same kernels, same order of every reduction: bit-identical losses.
TEST(EquivalenceTest, SingleRankExecutorMatchesTheReferenceRunnerBitForBit) {
  // Both runs use one kernel thread, as the rank processes of the launcher tests do.
  ops::SetKernelThreads(1);
  ReferenceOptions options;
  options.steps = kSteps;
  options.micro_batches = kMicroBatches;
  options.data_seed = kSeed;
  auto reference = RunReference(Gpt(1), options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ASSERT_EQ(Baseline().losses.size(), reference->losses.size());
  for (size_t s = 0; s < reference->losses.size(); ++s)
    EXPECT_EQ(Baseline().losses[s], reference->losses[s]) << "step " << s;
  EXPECT_LT(Baseline().losses.back(), Baseline().losses.front());  // it trains
}

// mp = 2 splits matmul reductions across ranks: equal within rounding, not bitwise.
TEST(EquivalenceTest, TensorParallelTwoRanksMatchesOneRank) {
  Module m = Gpt(2);
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(m, *run, Match::kWithinRounding);
}

// With mp > 1 the vocabulary is sharded (the builder's default): the embedding rows and
// the LM head's columns are split over the mp group, with the parallel cross-entropy.
// Its partial sums of exp() are added in another order: within rounding.
TEST(EquivalenceTest, VocabParallelFourRanksMatchesOneRank) {
  Module m = Gpt(4);
  const Program& p = m.main_program();
  EXPECT_EQ(p.FindVar("wte")->shape, (Shape{128 / 4, 64}));
  EXPECT_EQ(p.FindVar("head.weight")->shape, (Shape{64, 128 / 4}));
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(m, *run, Match::kWithinRounding);
}

// dp = 2: each replica runs 4 of the 8 micro-batches; gradients are all-reduced, so the
// sum is (g0+..+g3) + (g4+..+g7) instead of g0+..+g7: within rounding.
TEST(EquivalenceTest, DataParallelTwoReplicasMatchesOneRank) {
  Module m = Gpt(1, 1, 2);
  auto run = RunAsThreads(m, kSteps, kMicroBatches / 2, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(m, *run, Match::kWithinRounding);
}

TEST(EquivalenceTest, DataAndTensorParallelFourRanksMatchesOneRank) {
  Module m = Gpt(2, 1, 2);
  auto run = RunAsThreads(m, kSteps, kMicroBatches / 2, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(m, *run, Match::kWithinRounding);
}

}  // namespace
}  // namespace pw::testing

namespace pw::testing {
namespace {

// mp = 2, pp = 2 on four ranks, planned by split-program + schedule + insert-p2p.
struct ScheduleCase {
  const char* kind;
  int vpp;
  bool split_backward;
  int mp = 2;
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
  const char* p2p = "";  // insert-p2p's options
};

void PrintTo(const ScheduleCase& c, std::ostream* out) {
  *out << c.kind << " vpp=" << c.vpp << " mp=" << c.mp << " insert-p2p" << c.p2p;
}

class PipelineEquivalenceTest : public ::testing::TestWithParam<ScheduleCase> {};

Module PlannedGpt(const ScheduleCase& c) {
  models::GptConfig g = SmallGptConfig(c.mp, 2, c.vpp, c.placement);
  auto built = models::BuildGpt(g);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  std::string pipeline =
      StrCat(kTraining, ",split-program", c.split_backward ? "{split-backward=true}" : "",
             ",schedule{kind=", c.kind, ",micro-batches=", kMicroBatches, "},insert-p2p", c.p2p);
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

// Pipelining reorders micro-batches but every gradient is still summed in micro-batch
// order per stage: bit-identical at mp = 1; mp = 2 splits matmul reductions, so the
// comparison is within rounding there.
TEST_P(PipelineEquivalenceTest, MatchesOneRank) {
  const ScheduleCase& c = GetParam();
  Module m = PlannedGpt(c);
  ASSERT_FALSE(m.plan.empty());
  LoweringOptions lowering{{"tokens", "labels"}, "loss", false};
  Status check = CheckPlanForAllRanks(m, lowering);
  ASSERT_TRUE(check.ok()) << check.ToString();
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(m, *run, c.mp == 1 ? Match::kBitIdentical : Match::kWithinRounding);
}

constexpr auto kV = models::ChunkPlacement::kV;
constexpr auto kLoop = models::ChunkPlacement::kLoop;
// Every exchange waited for before the rank's next job (Megatron's blocking batches): the
// same work, ordered by more events.
constexpr const char* kBlockingBatches = "{order=batched,wait=exchange}";
// Megatron-LM's exchanges: an interleaved rank sends a forward's output after the backward
// that follows it.
constexpr const char* kMegatronExchanges = "{order=megatron,wait=exchange}";

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineEquivalenceTest,
    ::testing::Values(ScheduleCase{"fthenb", 1, false}, ScheduleCase{"1f1b", 1, false},
                      ScheduleCase{"eager-1f1b", 1, false},
                      ScheduleCase{"interleaved-1f1b", 2, false}, ScheduleCase{"zb-h1", 1, true},
                      ScheduleCase{"zb-h1", 1, true, 1}, ScheduleCase{"zb-h2", 1, true},
                      ScheduleCase{"zb-v", 2, true, 2, kV},
                      ScheduleCase{"dualpipe-v", 2, true, 2, kV},
                      ScheduleCase{"1f1b", 1, false, 1, kLoop, kBlockingBatches},
                      ScheduleCase{"interleaved-1f1b", 2, false, 2, kLoop, kBlockingBatches},
                      ScheduleCase{"zb-h1", 1, true, 1, kLoop, "{order=parity,wait=exchange}"},
                      ScheduleCase{"1f1b", 1, false, 1, kLoop, kMegatronExchanges},
                      ScheduleCase{"interleaved-1f1b", 2, false, 2, kLoop, kMegatronExchanges}),
    [](const auto& info) {
      const std::string_view p2p = info.param.p2p;
      std::string name =
          StrCat(info.param.kind, "_mp", info.param.mp,
                 p2p.empty()                                      ? ""
                 : p2p.find("megatron") != std::string_view::npos ? "_megatron_exchanges"
                                                                  : "_blocking_exchanges");
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// scatter-gather-p2p: each mp rank sends its slice of what crosses stages and the receivers
// all-gather it (forward activations; gradients back, from the backward or its input half):
// the same training bit for bit as the plan that sends the values whole.
class ScatterGatherP2PTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(ScatterGatherP2PTest, BitIdenticalToSendingTheValuesWhole) {
  ScheduleCase whole = GetParam();
  ScheduleCase sliced = whole;
  sliced.p2p = "{order=batched},scatter-gather-p2p";
  whole.p2p = "{order=batched}";
  const Module a = PlannedGpt(whole);
  const Module b = PlannedGpt(sliced);
  ASSERT_FALSE(a.plan.empty());
  ASSERT_FALSE(b.plan.empty());
  int slices = 0;  // values that now cross as slices
  for (const Program& p : b.programs())
    for (const Op& op : p.ops())
      slices += op.type == "c_split" && op.attrs.GetString("group") == "mp";
  EXPECT_GT(slices, 0);
  auto ra = RunAsThreads(a, kSteps, kMicroBatches, kSeed);
  auto rb = RunAsThreads(b, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(ra->losses, rb->losses);
  for (size_t rank = 0; rank < ra->params.size(); ++rank)
    for (const auto& [name, t] : ra->params[rank]) {
      auto it = rb->params[rank].find(name);
      ASSERT_NE(it, rb->params[rank].end()) << name;
      EXPECT_TRUE(SameBits(it->second, t)) << name << " on rank " << rank;
    }
}

INSTANTIATE_TEST_SUITE_P(Schedules, ScatterGatherP2PTest,
                         ::testing::Values(ScheduleCase{"1f1b", 1, false},
                                           ScheduleCase{"interleaved-1f1b", 2, false},
                                           ScheduleCase{"zb-h1", 1, true}),
                         [](const auto& info) {
                           std::string name = info.param.kind;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace pw::testing

namespace pw::testing {
namespace {

Module Unet(int pp, const std::string& schedule) {
  models::UnetConfig c;
  c.layers = 8;
  c.hidden = 64;
  c.micro_batch_size = 2;
  c.seq = 16;
  c.vocab = 128;
  c.pp = pp;
  auto built = models::BuildUnet(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  std::string pipeline = kTraining;
  if (!schedule.empty())
    pipeline += StrCat(",split-program,schedule{kind=", schedule, ",micro-batches=", kMicroBatches,
                       "},insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

// U-Net skip connections cross non-adjacent stages (stage 0 -> 3, 1 -> 2): sends and
// recvs between ranks that are not neighbours, in both directions. Pipelining alone keeps
// every sum's order: bit-identical.
TEST(UnetEquivalenceTest, FourStagePipelineMatchesOneRank) {
  Module base = Unet(1, "");
  auto base_run = RunAsThreads(base, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(base_run.ok()) << base_run.status().ToString();
  for (const char* kind : {"1f1b", "fthenb"}) {
    SCOPED_TRACE(kind);
    Module m = Unet(4, kind);
    ASSERT_FALSE(m.plan.empty());
    LoweringOptions lowering{{"tokens", "labels"}, "loss", false};
    Status check = CheckPlanForAllRanks(m, lowering);
    ASSERT_TRUE(check.ok()) << check.ToString();
    auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectSameTraining(m, *run, base, *base_run, Match::kBitIdentical);
  }
}

}  // namespace
}  // namespace pw::testing

namespace pw::testing {
namespace {

// dp = 2 x pp = 2: two pipelines of 4 micro-batches each, gradients all-reduced across the
// replicas before the optimizer. The sum order changes (per replica, then across): within
// rounding.
TEST(DataPipelineEquivalenceTest, TwoReplicasOfATwoStagePipelineMatchOneRank) {
  models::GptConfig g = SmallGptConfig(1, 2);
  auto built = models::BuildGpt(g);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  built->mesh.dp = 2;
  auto planned = WithPasses(std::move(built).value(),
                            StrCat(kTraining, ",split-program,schedule{kind=1f1b,micro-batches=",
                                   kMicroBatches / 2, "},insert-p2p"));
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  auto run = RunAsThreads(*planned, kSteps, kMicroBatches / 2, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(*planned, *run, Match::kWithinRounding);
}

}  // namespace
}  // namespace pw::testing
