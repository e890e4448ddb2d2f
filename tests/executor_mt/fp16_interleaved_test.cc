// fp16 with several model chunks per rank (interleaved-1f1b, zb-v): one loss scale for the
// whole model, every chunk of every rank checked for overflow. With a scale far too large
// the first steps overflow; every rank skips the same steps as the one-rank reference and
// training stays bit-identical to it (pipeline stages keep every sum's order).
// Model: the small GPT (4 layers: one per model chunk at pp 2 x vpp 2); 8 micro-batches;
// 6 steps.

#include <gtest/gtest.h>

#include "equivalence_util.h"
#include "executor/reference_runner.h"
#include "models/gpt.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 6;
constexpr int kMicroBatches = 8;
constexpr uint64_t kSeed = 1;
constexpr const char* kFp16 =
    "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6}";

Module Fp16Gpt(int pp, int vpp, const std::string& plan,
               models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  auto built = models::BuildGpt(SmallGptConfig(1, pp, vpp, placement));
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto planned = WithPasses(std::move(built).value(), kFp16 + plan);
  EXPECT_TRUE(planned.ok()) << plan << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

TEST(Fp16InterleavedTest, EveryRankSkipsTheStepsOneRankSkips) {
  Module one = Fp16Gpt(1, 1, "");
  ReferenceOptions options;
  options.steps = kSteps;
  options.micro_batches = kMicroBatches;
  options.data_seed = kSeed;
  options.track = {"amp.loss_scale", "amp.skipped_steps"};
  auto reference = RunReference(one, options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  const double skipped = reference->tracked[1].back();
  ASSERT_GE(skipped, 1);       // the scale overflowed at first
  ASSERT_LT(skipped, kSteps);  // and training went on

  const std::string plan =
      StrCat(",schedule{kind=interleaved-1f1b,micro-batches=", kMicroBatches, "},insert-p2p");
  for (const Module& m :
       {Fp16Gpt(2, 2, ",split-program" + plan),
        Fp16Gpt(2, 2,
                StrCat(",split-program{split-backward=true},schedule{kind=zb-v,micro-batches=",
                       kMicroBatches, "},insert-p2p"),
                models::ChunkPlacement::kV)}) {
    ASSERT_FALSE(m.plan.empty());
    SCOPED_TRACE(m.plan.schedule);
    auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_EQ(run->losses, reference->losses);
    for (const auto& params : run->params) {
      EXPECT_EQ(params.at("amp.skipped_steps").f32()[0], skipped);
      EXPECT_EQ(params.at("amp.loss_scale").f32()[0], reference->tracked[0].back());
    }
  }
}

// With dp replicas reducing the gradients in fp16 themselves (amp{grad-allreduce=low}, or
// grad-accumulation=low: the sums kept in fp16 and reduced as they are), the rank's one
// check (with its first chunk) reads every chunk's reduced gradient, so every chunk's
// reduction runs ahead of it, in the first chunk's optimizer job (before, the later chunks'
// reductions ran in their own jobs, after the check read them: the run refused the plan).
// The same training bit for bit as the replicas' pipeline without chunks, also with the
// distributed optimizer sharding through those reductions.
class LowPrecisionGradientsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LowPrecisionGradientsTest, EveryChunksReductionRunsBeforeTheCheck) {
  const std::string training = StrCat(
      "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=262144,", GetParam(), "}");
  auto replicas = [&](int vpp, const std::string& plan) {
    models::GptConfig c = SmallGptConfig(1, 2, vpp);
    c.dp = 2;
    auto built = models::BuildGpt(c);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    auto planned = WithPasses(std::move(built).value(), training + plan);
    EXPECT_TRUE(planned.ok()) << plan << ": " << planned.status().ToString();
    return planned.ok() ? std::move(planned).value() : Module{};
  };
  const std::string chunks =
      StrCat(",split-program,schedule{kind=interleaved-1f1b,micro-batches=", kMicroBatches / 2,
             "},insert-p2p");
  const Module base =
      replicas(1, StrCat(",split-program,schedule{kind=1f1b,micro-batches=", kMicroBatches / 2,
                         "},insert-p2p"));
  auto want = RunAsThreads(base, kSteps, kMicroBatches / 2, kSeed);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const std::string& plan : {chunks, chunks + ",distributed-optimizer"}) {
    SCOPED_TRACE(plan);
    const Module m = replicas(2, plan);
    ASSERT_FALSE(m.plan.empty());
    auto run = RunAsThreads(m, kSteps, kMicroBatches / 2, kSeed);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_EQ(run->losses, want->losses);
  }
}

INSTANTIATE_TEST_SUITE_P(Amp, LowPrecisionGradientsTest,
                         ::testing::Values("grad-allreduce=low", "grad-accumulation=low"),
                         [](const auto& info) {
                           return std::string(info.param).find("accumulation") != std::string::npos
                                      ? "LowSums"
                                      : "LowAllReduce";
                         });

}  // namespace
}  // namespace pw::testing
