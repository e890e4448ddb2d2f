// Data parallelism from the builder on: `GptConfig::dp` replicas share a step's global batch
// (micro-batch size x micro-batches x dp), each running its own micro-batches of the data
// stream, and the gradient sums are all-reduced over each dp group (in member order) and
// scaled by 1/(M·dp) before the optimizer. Against one replica running the whole global
// batch the sums associate differently ((g0+..+g3) + (g4+..+g7) instead of g0+..+g7), so
// training agrees within f32 rounding; two runs of one dp plan agree bit for bit. Ranks
// run as threads; tests/cli/data_parallel_cli_test.sh repeats this over Gloo processes.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "equivalence_util.h"
#include "ir/rank_sequence.h"
#include "models/gpt.h"
#include "models/model_recipe.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 3;
constexpr int kGlobalMicroBatches = 8;  // x micro-batch size 2: 16 samples per step
constexpr uint64_t kSeed = 1;
constexpr const char* kTraining = "append-backward{optimizer=sgd,lr=0.1}";

struct Layout {
  int dp, mp, pp;
};

void PrintTo(const Layout& l, std::ostream* out) {
  *out << "dp" << l.dp << "_mp" << l.mp << "_pp" << l.pp;
}

// The small GPT on `l`, trained by SGD; with pp > 1 planned 1f1b over the replica's share
// of the global batch.
Module Gpt(const Layout& l) {
  models::GptConfig c = SmallGptConfig(l.mp, l.pp);
  c.dp = l.dp;
  auto built = models::BuildGpt(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return Module{};
  std::string pipeline = kTraining;
  if (l.pp > 1)
    pipeline +=
        StrCat(",split-program,schedule{kind=1f1b,micro-batches=", kGlobalMicroBatches / l.dp,
               "},insert-p2p");
  auto trained = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(trained.ok()) << trained.status().ToString();
  return trained.ok() ? std::move(trained).value() : Module{};
}

StatusOr<ThreadRun> Train(const Module& m) {
  return RunAsThreads(m, kSteps, kGlobalMicroBatches / m.mesh.dp, kSeed);
}

const ThreadRun& OneReplica() {
  static const ThreadRun run = [] {
    auto r = Train(Gpt({1, 1, 1}));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ThreadRun{};
  }();
  return run;
}

TEST(DataParallelBuilderTest, TheMeshAndTheRecipeCarryDp) {
  models::GptConfig c = SmallGptConfig(2, 2);
  c.dp = 2;
  auto m = models::BuildGpt(c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->mesh, (Mesh{.dp = 2, .pp = 2, .mp = 2, .vpp = 1}));
  EXPECT_EQ(m->mesh.world_size(), 8);
  auto recipe = models::ReadModelRecipe(*m);
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  EXPECT_EQ(recipe->gpt.dp, 2);
  // A module built before dp existed records none: one replica.
  c.dp = 1;
  auto one = models::BuildGpt(c);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->metadata.Has("dp"));
  EXPECT_EQ(models::ReadModelRecipe(*one)->gpt.dp, 1);
  c.dp = 0;
  EXPECT_EQ(models::BuildGpt(c).status().message(), "gpt: dp must be > 0, got 0");
}

class DataParallelTest : public ::testing::TestWithParam<Layout> {};

// Within the rounding equivalence_util.h states (losses 1e-5 relative); the measured
// largest relative loss difference is printed for the record.
TEST_P(DataParallelTest, ReplicasTrainAsOneRankOnTheSameGlobalBatch) {
  const Module m = Gpt(GetParam());
  ASSERT_EQ(m.mesh.dp, GetParam().dp);
  auto run = Train(m);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(m, *run, Gpt({1, 1, 1}), OneReplica(), Match::kWithinRounding);
  double worst = 0;
  for (size_t s = 0; s < run->losses.size(); ++s)
    worst = std::max(worst, std::fabs(run->losses[s] - OneReplica().losses[s]) /
                                std::fabs(OneReplica().losses[s]));
  std::printf("%s: largest relative loss difference to dp 1 over %d steps: %.3g\n",
              ::testing::PrintToString(GetParam()).c_str(), kSteps, worst);
  RecordProperty("max_relative_loss_difference", StrCat(worst));
  // The replicas really split the batch: every replica's reports count its own share.
  EXPECT_LT(run->losses.back(), run->losses.front());
}

// Member-order all-reduce: the same plan trains the same bits every time.
TEST_P(DataParallelTest, TwoRunsOfOnePlanAreBitIdentical) {
  const Module m = Gpt(GetParam());
  auto a = Train(m);
  auto b = Train(m);
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectSameTraining(m, *a, m, *b, Match::kBitIdentical);
}

INSTANTIATE_TEST_SUITE_P(Layouts, DataParallelTest,
                         ::testing::Values(Layout{2, 1, 1}, Layout{4, 1, 1}, Layout{2, 2, 1},
                                           Layout{2, 1, 2}, Layout{2, 2, 2}),
                         [](const auto& info) { return ::testing::PrintToString(info.param); });

// overlap-grad-reduce: each gradient's all-reduce right after its last micro-batch's
// accumulation, on dp_comm, under the rest of the backward; the same sums, bit for bit,
// with every cross-stream dependency ordered (strict events: no event the plan lacks).
TEST(OverlapGradReduceTest, BitIdenticalToTheReductionBeforeTheOptimizer) {
  const Layout l{2, 2, 2};
  // The same stream passes on both sides: the one difference is where the all-reduce runs.
  auto streams = WithPasses(Gpt(l), "assign-streams,insert-events");
  auto overlapped = WithPasses(Gpt(l), "assign-streams,overlap-grad-reduce,insert-events");
  ASSERT_TRUE(streams.ok()) << streams.status().ToString();
  ASSERT_TRUE(overlapped.ok()) << overlapped.status().ToString();
  const Module& plain = *streams;
  RankRunOptions o;
  o.steps = kSteps;
  o.micro_batches = kGlobalMicroBatches / l.dp;
  o.data.data_seed = kSeed;
  o.strict_events = true;
  auto a = RunLocalRanks(plain, o);
  auto b = RunLocalRanks(*overlapped, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSameTraining(plain, ThreadRun{a->Losses(), a->PeakBytes(), a->params}, *overlapped,
                     ThreadRun{b->Losses(), b->PeakBytes(), b->params}, Match::kBitIdentical);
}

// Where the reductions go: every gradient of the rank once, on dp_comm, after the last
// accumulation of that gradient and before the optimizer job; none before the optimizer.
TEST(OverlapGradReduceTest, EachSumIsReducedAfterItsLastAccumulation) {
  auto m = WithPasses(Gpt({2, 1, 2}), "overlap-grad-reduce");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (int rank : {0, 2}) {  // the two stages of replica 0
    auto seq = BuildRankSequence(*m, rank);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    std::map<int, int> last_accumulate, reduce;  // slot -> item
    int optimizer = -1;
    for (int i = 0; i < static_cast<int>(seq->items.size()); ++i) {
      const WorkItem& item = seq->items[i];
      if (item.kind == WorkKind::kAccumulate) last_accumulate[item.writes.front()] = i;
      if (item.kind == WorkKind::kGradAllReduce) {
        EXPECT_EQ(item.stream, StreamType::kDpComm);
        EXPECT_TRUE(reduce.emplace(item.slot, i).second) << seq->Describe(i);
      }
      if (optimizer < 0 && seq->jobs[item.job]->kind == JobKind::kOptimizer) optimizer = i;
    }
    ASSERT_GE(optimizer, 0);
    EXPECT_EQ(reduce.size(), seq->grads.size()) << "rank " << rank;
    EXPECT_EQ(reduce.size(), last_accumulate.size());
    for (const auto& [slot, i] : reduce) {
      ASSERT_TRUE(last_accumulate.count(slot)) << seq->Describe(i);
      EXPECT_GT(i, last_accumulate.at(slot)) << seq->Describe(i);
      EXPECT_LT(i, optimizer) << seq->Describe(i);
    }
  }
}

}  // namespace
}  // namespace pw::testing
