// Mixed precision keeps the invariant: a bf16 plan computes what the bf16 one-rank
// reference of the same amp module computes. Where the reduction order is the same
// (one rank; pipeline stages, whose micro-batch sums keep their order) losses and every
// parameter are bit-identical; with mp = 2 each rank rounds its partial products to bf16
// before the all-reduce, where one rank rounds the full product once, so the comparison
// is within a tolerance (kBf16UpdateTolerance, below). Ranks run as threads; launcher_test.cc
// repeats the comparison over Gloo processes.

#include <gtest/gtest.h>

#include "equivalence_util.h"
#include "executor/initializer.h"
#include "executor/plan_check.h"
#include "executor/reference_runner.h"
#include "models/gpt.h"
#include "ops/kernel.h"
#include "ops/low_precision.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 3;
constexpr int kMicroBatches = 8;
constexpr uint64_t kSeed = 1;
// Adam where runs must be bit-identical; SGD where they are compared within a tolerance.
constexpr const char* kAdam = "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}";
constexpr const char* kSgd = "append-backward{optimizer=sgd,lr=0.1},amp{dtype=bf16}";
// bf16 keeps 8 significant bits: one rounding moves a value by up to a step of 2^-8 of
// it. A different rounding of the mp partial sums moves an activation or a gradient by
// about one step; SGD's update is lr times the gradient, so the two runs' updates of a
// parameter differ by a few steps of the update's own size (Adam's first updates are about
// lr · sign(g), which a gradient near zero flips under any rounding: SGD here). Measured on
// this model after 3 steps: at most 5.8 steps (wpe, whose gradient sums every position),
// biases 4.3, weights 3.2, layer-norm scales 3.1. Losses within 5e-5 relative.
constexpr double kBf16Step = 0x1p-8;
constexpr double kBf16LossTolerance = 2e-4;
constexpr double kBf16UpdateTolerance = 8 * kBf16Step;

// Whether `copy` (bf16) is `master` (f32) rounded, element by element.
bool IsRoundedCopy(const Tensor& copy, const Tensor& master) {
  if (copy.dtype() != DataType::kBFloat16 || copy.shape() != master.shape()) return false;
  for (int64_t i = 0; i < master.numel(); ++i)
    if (copy.data<uint16_t>()[i] != ops::FloatToBf16(master.f32()[i])) return false;
  return true;
}

Module AmpGpt(const char* training, int mp, int pp, const std::string& schedule = "",
              bool split_backward = false) {
  auto built = models::BuildGpt(SmallGptConfig(mp, pp));
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  std::string pipeline = training;
  if (!schedule.empty())
    pipeline +=
        StrCat(",split-program", split_backward ? "{split-backward=true}" : "",
               ",schedule{kind=", schedule, ",micro-batches=", kMicroBatches, "},insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

// The one-rank executor run of the mp = 1, pp = 1 amp module, per training pipeline.
const ThreadRun& OneRankBf16(const char* training) {
  static std::map<std::string, ThreadRun> runs;
  auto it = runs.find(training);
  if (it != runs.end()) return it->second;
  auto r = RunAsThreads(AmpGpt(training, 1, 1), kSteps, kMicroBatches, kSeed);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return runs[training] = r.ok() ? *r : ThreadRun{};
}

TEST(AmpEquivalenceTest, OneRankExecutorMatchesTheBf16ReferenceBitForBit) {
  ops::SetKernelThreads(1);
  ReferenceOptions options;
  options.steps = kSteps;
  options.micro_batches = kMicroBatches;
  options.data_seed = kSeed;
  auto reference = RunReference(AmpGpt(kAdam, 1, 1), options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ASSERT_EQ(OneRankBf16(kAdam).losses.size(), reference->losses.size());
  for (size_t s = 0; s < reference->losses.size(); ++s)
    EXPECT_EQ(OneRankBf16(kAdam).losses[s], reference->losses[s]) << "step " << s;
  EXPECT_LT(reference->losses.back(), reference->losses.front());
}

// The bf16 copies and the f32 masters of every parameter, and the Adam state.
void ExpectBitIdentical(const Module& module, const ThreadRun& run) {
  const ThreadRun& base = OneRankBf16(kAdam);
  ASSERT_EQ(run.losses.size(), base.losses.size());
  for (size_t s = 0; s < run.losses.size(); ++s)
    EXPECT_EQ(run.losses[s], base.losses[s]) << "step " << s;
  std::map<std::string, Tensor> got = FullParams(module, run);
  std::map<std::string, Tensor> want = FullParams(AmpGpt(kAdam, 1, 1), base);
  ASSERT_EQ(got.size(), want.size());
  int low = 0;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(SameBits(got.at(name), t)) << name;
    low += t.dtype() == DataType::kBFloat16;
  }
  EXPECT_GT(low, 0);  // the bf16 parameter copies were compared too
}

struct PipelineCase {
  const char* kind;
  bool split_backward;
};

class AmpPipelineTest : public ::testing::TestWithParam<PipelineCase> {};

// Pipeline stages keep every reduction's order: bit-identical.
TEST_P(AmpPipelineTest, TwoStagesAreBitIdenticalToOneRank) {
  Module m = AmpGpt(kAdam, 1, 2, GetParam().kind, GetParam().split_backward);
  LoweringOptions lowering{{"tokens", "labels"}, "loss", false};
  ASSERT_TRUE(CheckPlanForAllRanks(m, lowering).ok());
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectBitIdentical(m, *run);
}

// mp = 2 x pp = 2: within the stated bf16 tolerance.
TEST_P(AmpPipelineTest, TensorParallelFourRanksMatchOneRank) {
  Module m = AmpGpt(kSgd, 2, 2, GetParam().kind, GetParam().split_backward);
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const ThreadRun& base = OneRankBf16(kSgd);
  ASSERT_EQ(run->losses.size(), base.losses.size());
  for (size_t s = 0; s < base.losses.size(); ++s)
    EXPECT_NEAR(run->losses[s], base.losses[s], kBf16LossTolerance * base.losses[s]) << s;
  // The f32 masters: each update (from the initial value) against the reference's update,
  // so that a parameter that barely moves is compared at the scale of its move. The bf16
  // copies: their masters rounded, in both runs (the optimizer refreshes them after the
  // update).
  std::map<std::string, Tensor> got = FullParams(m, *run);
  const Module one = AmpGpt(kSgd, 1, 1);
  const std::map<std::string, Tensor> initial = InitialParams(one);
  const std::map<std::string, Tensor> want = FullParams(one, base);
  int copies = 0;
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    if (w.dtype() == DataType::kBFloat16) {
      const std::string master = name.substr(0, name.rfind("@bf16"));
      ASSERT_TRUE(want.count(master)) << name;
      EXPECT_TRUE(IsRoundedCopy(got.at(name), got.at(master))) << name;
      EXPECT_TRUE(IsRoundedCopy(w, want.at(master))) << name;
      ++copies;
      continue;
    }
    EXPECT_LE(CompareUpdates(got.at(name), w, initial.at(name)).relative(), kBf16UpdateTolerance)
        << name;
  }
  EXPECT_GT(copies, 0);
}

INSTANTIATE_TEST_SUITE_P(Schedules, AmpPipelineTest,
                         ::testing::Values(PipelineCase{"1f1b", false},
                                           PipelineCase{"zb-h1", true}),
                         [](const auto& info) {
                           return std::string(info.param.split_backward ? "zb_h1" : "onef1b");
                         });

// fp16 with a loss scale far too large: the first steps overflow in the backward, every
// rank skips them (parameters unchanged) and halves the scale, then training goes on. The
// flags are reduced exactly, so two pipeline stages skip the same steps and stay bit-
// identical to one rank; with mp = 2 every rank still skips the same steps.
TEST(AmpEquivalenceTest, Fp16LossScalingSkipsOverflowingStepsOnEveryRank) {
  constexpr const char* kFp16 =
      "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6}";
  constexpr int kFp16Steps = 6;
  ReferenceOptions options;
  options.steps = kFp16Steps;
  options.micro_batches = kMicroBatches;  // the plans' count
  options.data_seed = kSeed;
  options.track = {"amp.loss_scale", "amp.skipped_steps"};
  Module one = AmpGpt(kFp16, 1, 1);
  auto reference = RunReference(one, options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ASSERT_EQ(reference->losses.size(), static_cast<size_t>(kFp16Steps));
  const std::vector<double>& skipped = reference->tracked[1];
  EXPECT_EQ(skipped.front(), 1);  // the first step overflowed
  EXPECT_GE(skipped.back(), 1);
  EXPECT_LT(skipped.back(), kFp16Steps);  // and training went on
  EXPECT_EQ(reference->tracked[0].back(), 1e6 * std::pow(0.5, skipped.back()));

  auto base = RunAsThreads(one, kFp16Steps, kMicroBatches, kSeed);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(base->losses, reference->losses);
  // A skipped step leaves the parameters as they were.
  auto first = RunAsThreads(one, 1, kMicroBatches, kSeed);
  ASSERT_TRUE(first.ok());
  const Var& wte = *one.main_program().FindVar("wte");
  EXPECT_TRUE(SameBits(first->params[0].at("wte"), *MaterializeVar(wte)));

  Module pp2 = AmpGpt(kFp16, 1, 2, "1f1b");
  auto two = RunAsThreads(pp2, kFp16Steps, kMicroBatches, kSeed);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->losses, reference->losses);
  Module mp2 = AmpGpt(kFp16, 2, 2, "1f1b");
  auto four = RunAsThreads(mp2, kFp16Steps, kMicroBatches, kSeed);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  for (const ThreadRun* run : {&*two, &*four})
    for (const auto& params : run->params)
      EXPECT_EQ(params.at("amp.skipped_steps").f32()[0], skipped.back());
}

}  // namespace
}  // namespace pw::testing
