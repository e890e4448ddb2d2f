// Data parallelism from the builder on: `GptConfig::dp` replicas share a step's global batch
// (micro-batch size x micro-batches x dp), each running its own micro-batches of the data
// stream, and the gradient sums are all-reduced over each dp group (in member order) and
// scaled by 1/(M·dp) before the optimizer. Against one replica running the whole global
// batch the sums associate differently ((g0+..+g3) + (g4+..+g7) instead of g0+..+g7), so
// training agrees within f32 rounding; two runs of one dp plan agree bit for bit. Ranks
// run as threads; tests/cli/data_parallel_cli_test.sh repeats this over Gloo processes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "equivalence_util.h"
#include "ir/grad_reduce.h"
#include "ir/rank_sequence.h"
#include "models/gpt.h"
#include "models/llama.h"
#include "models/model_recipe.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "simulator/simulator.h"
#include "tests/small_gpt.h"
#include "tests/small_llama.h"

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

// The small GPT on `l`, trained by `training` (SGD by default); with pp > 1, or passes to
// run on the plan (`after_plan`), planned 1f1b over the replica's share
// of the global batch.
Module Gpt(const Layout& l, const std::string& training = kTraining,
           const std::string& after_plan = "") {
  models::GptConfig c = SmallGptConfig(l.mp, l.pp);
  c.dp = l.dp;
  auto built = models::BuildGpt(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return Module{};
  std::string pipeline = training;
  if (l.pp > 1 || !after_plan.empty())
    pipeline +=
        StrCat(",split-program,schedule{kind=1f1b,micro-batches=", kGlobalMicroBatches / l.dp,
               "},insert-p2p", after_plan);
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

// The Llama builder takes dp alike: dp 2 x mp 2 x pp 2 (its kv heads split over mp, 1f1b)
// against the one-rank Llama on the same global batch, Adam.
TEST(DataParallelLlamaTest, ReplicasTrainAsOneRankOnTheSameGlobalBatch) {
  auto llama = [](int dp, int mp, int pp) {
    models::LlamaConfig c = SmallLlamaConfig(mp, pp);
    c.dp = dp;
    auto built = models::BuildLlama(c);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    std::string pipeline = "append-backward{optimizer=adam,lr=0.01}";
    if (pp > 1)
      pipeline +=
          StrCat(",split-program,schedule{kind=1f1b,micro-batches=", kGlobalMicroBatches / dp,
                 "},insert-p2p");
    auto trained = WithPasses(std::move(built).value(), pipeline);
    EXPECT_TRUE(trained.ok()) << trained.status().ToString();
    return std::move(trained).value();
  };
  const Module one = llama(1, 1, 1), dp2 = llama(2, 2, 2);
  EXPECT_EQ(dp2.mesh.world_size(), 8);
  auto a = Train(one);
  auto b = Train(dp2);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->losses.size(), b->losses.size());
  for (size_t s = 0; s < a->losses.size(); ++s)
    EXPECT_NEAR(b->losses[s], a->losses[s], kLossTolerance * std::fabs(a->losses[s])) << s;
  EXPECT_LT(b->losses.back(), b->losses.front());
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

// overlap-grad-reduce: each gradient sum joins a bucket right after its last micro-batch's
// accumulation; a full bucket is all-reduced on dp_comm, under the rest of the backward, as
// one collective. The same sums, bit for bit, whatever the bucket size (each element summed
// in member order wherever it lies in the bucket), with every cross-stream dependency
// ordered (strict events: no event the plan lacks). Bucket sizes for the small GPT's ~400 KiB
// of gradients per stage: 0 (each sum alone), 0.01 MiB (several buckets), the default
// without a cost model (25 MiB: one bucket per rank).
class OverlapGradReduceTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string Pass() const { return StrCat("overlap-grad-reduce{bucket-mb=", GetParam(), "}"); }
};

TEST_P(OverlapGradReduceTest, BitIdenticalToTheReductionBeforeTheOptimizer) {
  const Layout l{2, 2, 2};
  // The same stream passes on both sides: the one difference is where the all-reduce runs.
  auto streams = WithPasses(Gpt(l), "assign-streams,insert-events");
  auto overlapped = WithPasses(Gpt(l), StrCat("assign-streams,", Pass(), ",insert-events"));
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

// 16-bit gradient sums (amp{grad-accumulation=low}) reduced in the backward, in buckets, as
// they are: the same training bit for bit as their reduction before the optimizer. A plan
// whose optimizer all-reduces its own 16-bit copies (grad-allreduce=low) has nothing for the
// pass to move: refused, with what to use instead.
TEST(OverlapGradReduceLowTest, SixteenBitSumsReduceInTheBackward) {
  const Layout l{2, 2, 2};
  constexpr const char* kLowSums =
      "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16,grad-accumulation=low}";
  auto streams = WithPasses(Gpt(l, kLowSums), "assign-streams,insert-events");
  auto overlapped = WithPasses(Gpt(l, kLowSums),
                               "assign-streams,overlap-grad-reduce{bucket-mb=0.01},insert-events");
  ASSERT_TRUE(streams.ok()) << streams.status().ToString();
  ASSERT_TRUE(overlapped.ok()) << overlapped.status().ToString();
  RankRunOptions o;
  o.steps = kSteps;
  o.micro_batches = kGlobalMicroBatches / l.dp;
  o.data.data_seed = kSeed;
  o.strict_events = true;
  auto a = RunLocalRanks(*streams, o);
  auto b = RunLocalRanks(*overlapped, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSameTraining(*streams, ThreadRun{a->Losses(), a->PeakBytes(), a->params}, *overlapped,
                     ThreadRun{b->Losses(), b->PeakBytes(), b->params}, Match::kBitIdentical);
  auto seq = BuildRankSequence(*overlapped, 0);
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  int in_backward = 0;
  for (const WorkItem& item : seq->items)
    in_backward +=
        item.kind == WorkKind::kGradAllReduce && seq->jobs[item.job]->kind != JobKind::kOptimizer;
  EXPECT_GT(in_backward, 0);

  auto refused = WithPasses(
      Gpt(l, "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16,grad-allreduce=low}"),
      "assign-streams,overlap-grad-reduce,insert-events");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("grad-accumulation=low"), std::string::npos)
      << refused.status().message();
}

// Where the reductions go: every gradient of the rank in exactly one bucket, on dp_comm,
// after the last accumulation of each of its sums (an add of the executor's, or a
// weight-gradient GEMM that adds into the sum itself) and before the optimizer job; every
// bucket but the last holds at least bucket-mb, and none would have been full without its
// last sum.
TEST_P(OverlapGradReduceTest, EachSumIsReducedInOneBucketAfterItsLastAccumulation) {
  auto m = WithPasses(Gpt({2, 1, 2}), Pass());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int64_t bucket = m->metadata.GetInt(kMetaGradBucketBytes, -1);
  ASSERT_GE(bucket, 0);
  for (int rank : {0, 2}) {  // the two stages of replica 0
    auto seq = BuildRankSequence(*m, rank);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    std::map<int, int> last_accumulate, reduce;  // slot -> item
    std::vector<int> buckets;
    int optimizer = -1, fused = 0, added = 0;
    for (int i = 0; i < static_cast<int>(seq->items.size()); ++i) {
      const WorkItem& item = seq->items[i];
      if (item.kind == WorkKind::kAccumulate) last_accumulate[item.writes.front()] = i, ++added;
      if (item.accumulate_into >= 0) {
        EXPECT_EQ(seq->op(item).type, "matmul_weight_grad") << seq->Describe(i);
        EXPECT_THAT(item.writes, ::testing::Contains(item.accumulate_into));
        last_accumulate[item.accumulate_into] = i, ++fused;
      }
      if (item.kind == WorkKind::kGradAllReduce) {
        EXPECT_EQ(item.stream, StreamType::kDpComm);
        EXPECT_EQ(item.reads, item.writes);
        for (int s : item.writes) EXPECT_TRUE(reduce.emplace(s, i).second) << seq->Describe(i);
        buckets.push_back(i);
      }
      if (optimizer < 0 && seq->jobs[item.job]->kind == JobKind::kOptimizer) optimizer = i;
    }
    ASSERT_GE(optimizer, 0);
    EXPECT_GT(fused, 0) << "rank " << rank;  // the linear weights' GEMMs
    EXPECT_GT(added, 0) << "rank " << rank;  // biases and norms
    EXPECT_EQ(reduce.size(), seq->grads.size()) << "rank " << rank;
    EXPECT_EQ(reduce.size(), last_accumulate.size());
    for (const auto& [slot, i] : reduce) {
      ASSERT_TRUE(last_accumulate.count(slot)) << seq->Describe(i);
      EXPECT_GT(i, last_accumulate.at(slot)) << seq->Describe(i);
      EXPECT_LT(i, optimizer) << seq->Describe(i);
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
      const WorkItem& item = seq->items[buckets[b]];
      int64_t bytes = 0;
      for (int s : item.writes) bytes += seq->slots[s].decl->num_bytes();
      const int64_t last = seq->slots[item.writes.back()].decl->num_bytes();
      if (b + 1 < buckets.size()) EXPECT_GE(bytes, bucket) << seq->Describe(buckets[b]);
      EXPECT_LT(bytes - last, std::max<int64_t>(bucket, 1)) << seq->Describe(buckets[b]);
    }
    if (bucket == 0) EXPECT_EQ(buckets.size(), seq->grads.size()) << "rank " << rank;
    if (bucket >= (int64_t{1} << 20)) EXPECT_EQ(buckets.size(), 1u) << "rank " << rank;
    if (std::string(GetParam()) == "0.01") EXPECT_GT(buckets.size(), 2u) << "rank " << rank;
    if (std::string(GetParam()) == "0.01") EXPECT_LT(buckets.size(), seq->grads.size());
  }
}

INSTANTIATE_TEST_SUITE_P(BucketMb, OverlapGradReduceTest, ::testing::Values("0", "0.01", "auto"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

// distributed-optimizer (ZeRO-1): the gradient sums reduce-scattered over dp, each dp rank
// updating its rows of every parameter whose first dim divides by dp (and Adam's moments of
// those rows only), the parameters all-gathered. Against the same dp plan without it: the
// same losses and parameters bit for bit, and each rank's optimizer state is its rows of
// the plain run's.
struct ZeroCase {
  Layout layout;
  const char* training;
  const char* after = "";  // passes after the distributed optimizer
};

void PrintTo(const ZeroCase& c, std::ostream* out) {
  const std::string training = c.training;
  *out << ::testing::PrintToString(c.layout)
       << (training.find("adam") != std::string::npos ? "_adam" : "_sgd")
       << (training.find("bf16") != std::string::npos ? "_bf16" : "")
       << (training.find("fp16") != std::string::npos ? "_fp16" : "")
       << (training.find("init-scale=262144") != std::string::npos ? "_overflowing" : "")
       << (training.find("grad-allreduce=low") != std::string::npos ? "_low_allreduce" : "")
       << (training.find("grad-accumulation=low") != std::string::npos ? "_low_sums" : "")
       << (std::string(c.after).find("overlap-grad-reduce") != std::string::npos ? "_overlap" : "")
       << (std::string(c.after).find("overlap-param-gather") != std::string::npos ? "_gather" : "");
}

class DistributedOptimizerTest : public ::testing::TestWithParam<ZeroCase> {};

TEST_P(DistributedOptimizerTest, BitIdenticalToTheSameDpPlanWithoutIt) {
  const ZeroCase& c = GetParam();
  const Module plain = Gpt(c.layout, c.training, "");
  const Module zero = Gpt(c.layout, c.training, StrCat(",distributed-optimizer", c.after));
  auto a = Train(plain);
  auto b = Train(zero);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->losses.size(), b->losses.size());
  for (size_t s = 0; s < a->losses.size(); ++s) EXPECT_EQ(a->losses[s], b->losses[s]) << s;
  EXPECT_LT(a->losses.back(), a->losses.front());  // it trains (no step skipped throughout)
  const RankLayout layout(plain.mesh);
  int sharded = 0;
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const int d = layout.Coord(rank).dp, dp = plain.mesh.dp;
    for (const auto& [name, want] : a->params[rank]) {
      auto it = b->params[rank].find(name);
      ASSERT_NE(it, b->params[rank].end()) << name << " on rank " << rank;
      const Tensor& got = it->second;
      if (got.shape() == want.shape()) {
        EXPECT_TRUE(SameBits(got, want)) << name << " on rank " << rank;
        continue;
      }
      // Optimizer state of a sharded update: this dp rank's rows of the whole.
      ASSERT_EQ(got.shape()[0] * dp, want.shape()[0]) << name;
      const int64_t bytes = got.nbytes();
      EXPECT_EQ(std::memcmp(got.raw(), static_cast<const char*>(want.raw()) + d * bytes, bytes), 0)
          << name << " on rank " << rank << " (dp rank " << d << ")";
      ++sharded;
    }
    if (rank == 0)
      std::printf("%s rank 0: peak %lld bytes with the distributed optimizer, %lld without\n",
                  ::testing::PrintToString(c).c_str(), static_cast<long long>(b->peak_bytes[0]),
                  static_cast<long long>(a->peak_bytes[0]));
  }
  if (std::string(c.training).find("adam") != std::string::npos) {
    EXPECT_GT(sharded, 0);  // Adam's moments are cut
    // Per rank, the moments of the sharded parameters shrink by (dp - 1) / dp; the two
    // shards the update adds (gradient and parameter rows) are transient.
    for (int rank = 0; rank < layout.world_size(); ++rank)
      EXPECT_LT(b->peak_bytes[rank], a->peak_bytes[rank]) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DistributedOptimizerTest,
    ::testing::Values(
        ZeroCase{{2, 1, 1}, "append-backward{optimizer=adam,lr=0.01}"},
        ZeroCase{{2, 1, 1}, kTraining},
        ZeroCase{{4, 1, 1}, "append-backward{optimizer=adam,lr=0.01}"},
        ZeroCase{{2, 2, 2}, "append-backward{optimizer=adam,lr=0.01}"},
        ZeroCase{{2, 1, 2}, "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}"},
        // fp16's unscale and overflow check run on the shard, the flag max-reduced over dp.
        ZeroCase{{2, 1, 2},
                 "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1024}"},
        // At this scale the first steps overflow in the rows of one replica only: without
        // the flag's reduction over dp the replicas would skip different steps.
        ZeroCase{{2, 1, 2},
                 "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=262144}"},
        // amp's all-reduce of the 16-bit gradients becomes their reduce-scatter.
        ZeroCase{{2, 1, 2},
                 "append-backward{optimizer=adam,lr=0.01},"
                 "amp{dtype=fp16,init-scale=1024,grad-allreduce=low}"},
        ZeroCase{{2, 1, 1},
                 "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16,grad-allreduce=low}"},
        // 16-bit gradient sums reduce-scattered as they are, scaled before as the executor
        // scales them without the pass.
        ZeroCase{{2, 1, 2},
                 "append-backward{optimizer=adam,lr=0.01},"
                 "amp{dtype=fp16,init-scale=1024,grad-accumulation=low}"},
        ZeroCase{{2, 1, 2},
                 "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1024}",
                 ",assign-streams,overlap-grad-reduce,overlap-param-gather{at=update},"
                 "insert-events"},
        ZeroCase{{2, 2, 2},
                 "append-backward{optimizer=adam,lr=0.01}",
                 ",assign-streams,overlap-grad-reduce,insert-events"},
        // The all-gathers at the next step's start; the parameters synced after the last.
        ZeroCase{{4, 1, 1}, "append-backward{optimizer=adam,lr=0.01}", ",overlap-param-gather"},
        ZeroCase{{2, 2, 2},
                 "append-backward{optimizer=adam,lr=0.01}",
                 ",assign-streams,overlap-grad-reduce{bucket-mb=0.01},overlap-param-gather,"
                 "insert-events"},
        ZeroCase{{2, 1, 2},
                 "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}",
                 ",assign-streams,overlap-param-gather,insert-events"}),
    [](const auto& info) { return ::testing::PrintToString(info.param); });

// With overlap-grad-reduce after it, each reduce-scatter of the distributed optimizer is
// issued in the backward once its gradient's last accumulation is done, in buckets of
// bucket-mb (one c_reduce_scatter_coalesced each; a bucket of one is the program's op), before
// the optimizer job; the rest of the optimizer program (scale, c_split, update, all-gather)
// stays in the optimizer job.
class ReduceScatterBucketTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReduceScatterBucketTest, ReduceScattersStartInTheBackwardWithOverlapGradReduce) {
  const Module m =
      Gpt({2, 1, 2}, "append-backward{optimizer=adam,lr=0.01}",
          StrCat(",distributed-optimizer,overlap-grad-reduce{bucket-mb=", GetParam(), "}"));
  const int64_t bucket = m.metadata.GetInt(kMetaGradBucketBytes, -1);
  for (int rank : {0, 2}) {
    auto seq = BuildRankSequence(m, rank);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    std::map<int, int> last_accumulate, scattered;  // gradient slot -> item
    int optimizer = -1, buckets = 0;
    for (int i = 0; i < static_cast<int>(seq->items.size()); ++i) {
      const WorkItem& item = seq->items[i];
      EXPECT_NE(item.kind, WorkKind::kGradAllReduce) << seq->Describe(i);  // all sharded
      if (item.kind == WorkKind::kAccumulate) last_accumulate[item.writes.front()] = i;
      if (item.accumulate_into >= 0) last_accumulate[item.accumulate_into] = i;
      const bool in_optimizer = seq->jobs[item.job]->kind == JobKind::kOptimizer;
      std::vector<int> grads;
      if (item.kind == WorkKind::kGradReduceScatter) {
        EXPECT_GT(item.coalesced.size(), 1u) << seq->Describe(i);
        EXPECT_EQ(item.reads.size(), item.coalesced.size());
        int64_t bytes = 0;
        for (int g : item.reads) bytes += seq->slots[g].decl->num_bytes();
        EXPECT_LT(bytes - seq->slots[item.reads.back()].decl->num_bytes(), bucket)
            << seq->Describe(i) << " was full before its last gradient";
        grads = item.reads;
        ++buckets;
      } else if (item.kind == WorkKind::kOp && in_optimizer &&
                 seq->op(item).type == "c_reduce_scatter_sum") {
        grads = {item.reads.front()};
      } else if (item.kind == WorkKind::kOp && in_optimizer && optimizer < 0) {
        optimizer = i;
      }
      for (int g : grads) {
        ASSERT_TRUE(last_accumulate.count(g)) << seq->Describe(i);
        EXPECT_LT(last_accumulate.at(g), i) << seq->Describe(i);
        EXPECT_LT(optimizer, 0) << seq->Describe(i) << " after the optimizer began";
        EXPECT_TRUE(scattered.emplace(g, i).second) << seq->Describe(i) << " twice";
      }
    }
    EXPECT_EQ(scattered.size(), seq->grads.size());
    // No accumulation of a gradient after its reduce-scatter.
    for (const auto& [g, i] : scattered) EXPECT_LT(last_accumulate.at(g), i);
    if (bucket == 0)
      EXPECT_EQ(buckets, 0) << "rank " << rank;  // each alone
    else
      EXPECT_GT(buckets, 0) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(BucketMb, ReduceScatterBucketTest, ::testing::Values("0", "0.01", "auto"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

// Train()'s run of a two-replica plan, for tests that look at the ranks between steps.
RankRunOptions TwoReplicaRun() {
  RankRunOptions o;
  o.steps = kSteps;
  o.micro_batches = kGlobalMicroBatches / 2;
  o.data.data_seed = kSeed;
  return o;
}

// overlap-param-gather: each sharded parameter's all-gather leaves the optimizer job for the
// step's start, on dp_comm, first of all work, in the order the step first reads the
// parameters; the optimizer job keeps its reduce-scatters, scales, views and updates.
TEST(OverlapParamGatherTest, GathersOpenTheStepInFirstReadOrder) {
  const Module m = Gpt({2, 1, 2}, "append-backward{optimizer=adam,lr=0.01}",
                       ",distributed-optimizer,overlap-param-gather");
  for (int rank : {0, 2}) {
    auto seq = BuildRankSequence(m, rank);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    std::vector<std::string> gathered, first_read;
    std::set<std::string> seen;
    int updates = 0;
    for (int i = 0; i < static_cast<int>(seq->items.size()); ++i) {
      const WorkItem& item = seq->items[i];
      if (item.kind == WorkKind::kParamGather) {
        EXPECT_EQ(static_cast<size_t>(i), gathered.size()) << seq->Describe(i) << " not first";
        EXPECT_EQ(item.stream, StreamType::kDpComm);
        EXPECT_EQ(seq->op(item).type, "c_all_gather");
        gathered.push_back(seq->slots[item.slot].var);
        continue;
      }
      if (item.kind != WorkKind::kOp) continue;
      const Op& op = seq->op(item);
      EXPECT_NE(op.type, "c_all_gather") << seq->Describe(i) << " left in the optimizer job";
      if (op.type == "adam") ++updates;
      op.ForEachInput([&](const std::string& v) {
        if (seq->slots[seq->SlotOf(item, v)].persistable && seen.insert(v).second)
          first_read.push_back(v);
      });
    }
    EXPECT_EQ(static_cast<int>(gathered.size()), updates) << "rank " << rank;
    // The gathered parameters appear in the order the step first reads them.
    std::vector<std::string> order;
    for (const std::string& v : first_read)
      if (std::find(gathered.begin(), gathered.end(), v) != gathered.end()) order.push_back(v);
    EXPECT_EQ(order, gathered) << "rank " << rank;
  }
  auto early = WithPasses(Gpt({2, 1, 2}), "overlap-param-gather");
  EXPECT_NE(early.status().message().find("run distributed-optimizer before it"), std::string::npos)
      << early.status().ToString();
}

// A second run of the pass with the same placement changes nothing (under amp too, where
// the first run rewrote what is gathered); another placement only moves the gathers.
TEST(OverlapParamGatherTest, ASecondRunChangesNothing) {
  const std::string training = "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}";
  for (const char* at : {"next-step", "update"}) {
    const std::string pass = StrCat(",overlap-param-gather{at=", at, "}");
    const Module once = Gpt({2, 1, 2}, training, ",distributed-optimizer" + pass);
    const Module twice = Gpt({2, 1, 2}, training, ",distributed-optimizer" + pass + pass);
    EXPECT_TRUE(once == twice) << at;
  }
  const Module next = Gpt({2, 1, 2}, training,
                          ",distributed-optimizer,overlap-param-gather{at=next-step},"
                          "overlap-param-gather{at=update}");
  EXPECT_EQ(next.metadata.GetString(kMetaParamGather), kParamGatherAfterUpdate);
}

// Between steps the deferred parameters hold only this rank's rows: reading one is refused
// in one line; the runner syncs them after the last step, and they are the plan's without
// the pass bit for bit.
TEST(OverlapParamGatherTest, StaleParametersAreRefusedUntilSynced) {
  const Module plain =
      Gpt({2, 1, 1}, "append-backward{optimizer=adam,lr=0.01}", ",distributed-optimizer");
  const Module deferred = Gpt({2, 1, 1}, "append-backward{optimizer=adam,lr=0.01}",
                              ",distributed-optimizer,overlap-param-gather");
  auto a = Train(plain);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  RankRunOptions o = TwoReplicaRun();
  std::mutex mu;
  std::vector<Status> refused;
  int stale = 0;
  o.on_traced_step = [&](const Interpreter& interp) -> Status {  // after the last step
    StatusOr<Tensor> read = interp.PersistentOnHost("wpe");
    std::lock_guard<std::mutex> lock(mu);
    stale += interp.parameters_stale();
    refused.push_back(read.status());
    return OkStatus();
  };
  auto b = RunLocalRanks(deferred, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(stale, 2);
  ASSERT_EQ(refused.size(), 2u);
  for (const Status& s : refused)
    EXPECT_NE(s.message().find("holds only this dp rank's rows since the last step"),
              std::string::npos)
        << s.ToString();
  for (int rank = 0; rank < 2; ++rank)
    for (const auto& [name, want] : a->params[rank])
      EXPECT_TRUE(SameBits(b->params[rank].at(name), want)) << name << " on rank " << rank;
}

// Under amp no step reads an f32 master weight whole (the forward reads the 16-bit copy,
// the update its own rows), so with overlap-param-gather each rank holds only its rows of
// it from a step's start until the parameters are synced, as a distributed optimizer shards
// its masters: the peak drops by (dp - 1) / dp of the masters, the simulator counts the same
// bytes, and training is bit-identical to the plan that holds them whole.
TEST(OverlapParamGatherTest, AmpMasterWeightsAreHeldInShardsBetweenSyncs) {
  const std::string training = "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}";
  const Module whole =
      Gpt({2, 1, 2}, training, ",distributed-optimizer,assign-streams,insert-events");
  const Module held =
      Gpt({2, 1, 2}, training,
          ",distributed-optimizer,assign-streams,overlap-param-gather,insert-events");
  // Which parameters are held in shards, and the bytes that frees on each rank.
  std::vector<std::set<std::string>> masters(4);
  std::vector<int64_t> freed(4, 0);
  for (int rank = 0; rank < 4; ++rank) {
    auto seq = BuildRankSequence(held, rank);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    for (const SeqSlot& slot : seq->slots) {
      if (slot.held_as < 0) continue;
      const SeqSlot& rows = seq->slots[slot.held_as];
      EXPECT_EQ(slot.decl->dtype, DataType::kFloat32) << slot.var;
      EXPECT_TRUE(slot.persistable) << slot.var;
      EXPECT_EQ(&seq->slots[rows.view_of], &slot) << slot.var;
      EXPECT_EQ(rows.decl->shape[0] * 2, slot.decl->shape[0]) << slot.var;
      EXPECT_NE(held.FindVar(slot.var + "@bf16"), nullptr) << slot.var << " is no amp master";
      masters[rank].insert(slot.var);
      freed[rank] += slot.decl->num_bytes() - rows.decl->num_bytes();
    }
    EXPECT_FALSE(masters[rank].empty()) << "rank " << rank;
    auto plain = BuildRankSequence(whole, rank);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    for (const SeqSlot& slot : plain->slots) EXPECT_EQ(slot.held_as, -1) << slot.var;
  }

  auto a = Train(whole);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  RankRunOptions o = TwoReplicaRun();
  std::mutex mu;
  std::vector<std::map<std::string, Tensor>> rows(4);  // after the last step, before the sync
  o.on_traced_step = [&](const Interpreter& interp) -> Status {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& name : masters[interp.rank()])
      rows[interp.rank()][name] = interp.FindPersistent(name)->Clone();
    return OkStatus();
  };
  auto local = RunLocalRanks(held, o);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(local->Losses(), a->losses);
  const std::vector<int64_t> peaks = local->PeakBytes();
  auto estimator = MakeEstimator("cpu", "");
  ASSERT_TRUE(estimator.ok());
  cost::SimOptions sim_options;
  sim_options.record_timeline = false;
  auto sim_whole = cost::Simulator(*estimator, ops::Registry(), sim_options).Run(whole);
  auto sim_held = cost::Simulator(*estimator, ops::Registry(), sim_options).Run(held);
  ASSERT_TRUE(sim_whole.ok() && sim_held.ok());
  for (int rank = 0; rank < 4; ++rank) {
    const int d = RankLayout(held.mesh).Coord(rank).dp;
    for (const auto& [name, want] : a->params[rank])
      EXPECT_TRUE(SameBits(local->params[rank].at(name), want)) << name << " on rank " << rank;
    for (const auto& [name, mine] : rows[rank]) {  // this dp rank's rows of the synced whole
      const Tensor& synced = local->params[rank].at(name);
      ASSERT_EQ(mine.shape()[0] * 2, synced.shape()[0]) << name;
      EXPECT_EQ(std::memcmp(mine.raw(), static_cast<const char*>(synced.raw()) + d * mine.nbytes(),
                            mine.nbytes()),
                0)
          << name << " on rank " << rank;
    }
    // The peak falls by the masters' other rows, measured and simulated alike.
    const int64_t measured = a->peak_bytes[rank] - peaks[rank];
    const int64_t simulated = sim_whole->ranks[rank].peak_bytes - sim_held->ranks[rank].peak_bytes;
    EXPECT_NEAR(static_cast<double>(measured), static_cast<double>(freed[rank]),
                0.01 * static_cast<double>(a->peak_bytes[rank]))
        << "rank " << rank;
    EXPECT_NEAR(static_cast<double>(simulated), static_cast<double>(freed[rank]),
                0.01 * static_cast<double>(a->peak_bytes[rank]))
        << "rank " << rank;
  }
}

TEST(DistributedOptimizerPassTest, RefusesModulesItCannotShard) {
  auto unplanned = WithPasses(Gpt({2, 1, 1}), "distributed-optimizer");
  EXPECT_NE(unplanned.status().message().find(
                "distributed-optimizer needs a plan: run it after split-program and schedule"),
            std::string::npos)
      << unplanned.status().ToString();
  auto late = WithPasses(Gpt({2, 1, 2}), "overlap-grad-reduce,distributed-optimizer");
  EXPECT_NE(late.status().message().find("run it before overlap-grad-reduce"), std::string::npos)
      << late.status().ToString();
  // One replica: nothing to shard.
  const Module one = Gpt({1, 1, 2});
  auto same = WithPasses(one, "distributed-optimizer");
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(*same == one);
}

}  // namespace
}  // namespace pw::testing
