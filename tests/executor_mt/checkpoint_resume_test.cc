// Checkpoints and warm-up steps keep training exact: a warm-up step's updates are undone
// bit for bit (its loss scaling included), and a run stopped after a checkpoint and resumed from it
// computes the losses and final parameters (optimizer state and loss scaling included) of
// the run that was never stopped, bit for bit, for every schedule kind and precision; a
// checkpoint written under one plan resumes under another mp x pp x vpp (its vars re-cut)
// and then trains as the uninterrupted run up to the reduction order the plan changes.
// Ranks run as threads; tests/cli/checkpoint_cli_test.sh does the same over processes.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "equivalence_util.h"
#include "executor/data.h"
#include "executor/executor.h"
#include "executor/reference_runner.h"
#include "fresh_dir.h"
#include "ops/kernel.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kMicroBatches = 4;
constexpr uint64_t kSeed = 1;
constexpr const char* kAdam = "append-backward{optimizer=adam,lr=0.01}";
constexpr const char* kBf16 = "append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}";
// A loss scale far too large: the first steps overflow and are skipped, so a resumed run
// that forgot the scale would skip again.
constexpr const char* kFp16 =
    "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6}";
constexpr auto kLoop = models::ChunkPlacement::kLoop;
constexpr auto kV = models::ChunkPlacement::kV;

struct Plan {
  const char* kind = "";  // empty: unplanned (mp = pp = 1)
  int mp = 1, pp = 1, vpp = 1;
  bool split_backward = false;
  models::ChunkPlacement placement = kLoop;
  const char* training = kAdam;
};

void PrintTo(const Plan& p, std::ostream* out) {
  *out << p.kind << " mp" << p.mp << " pp" << p.pp << " vpp" << p.vpp << " " << p.training;
}

Module Planned(const Plan& p) {
  auto built = models::BuildGpt(SmallGptConfig(p.mp, p.pp, p.vpp, p.placement));
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  std::string pipeline = p.training;
  if (*p.kind)
    pipeline += StrCat(",split-program", p.split_backward ? "{split-backward=true}" : "",
                       ",schedule{kind=", p.kind, ",micro-batches=", kMicroBatches, "},insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

// `steps` in all, from the checkpoint `checkpoint.resume` names when it names one, after
// `warmup_steps` untimed ones.
StatusOr<ThreadRun> Train(const Module& module, int64_t steps, CheckpointOptions checkpoint,
                          int warmup_steps = 0, double* warmup_ms = nullptr) {
  RankRunOptions o;
  o.steps = steps;
  o.warmup_steps = warmup_steps;
  o.micro_batches = kMicroBatches;
  o.data.data_seed = kSeed;
  o.checkpoint = std::move(checkpoint);
  PW_ASSIGN_OR_RETURN(LocalRunResult local, RunLocalRanks(module, o));
  if (warmup_ms) {
    *warmup_ms = 0;
    for (const auto& rank : local.reports) *warmup_ms = std::max(*warmup_ms, rank[0].warmup_ms);
  }
  return ThreadRun{local.Losses(), local.PeakBytes(), std::move(local.params)};
}

void ExpectSameParams(const Module& module, const ThreadRun& run, const ThreadRun& want) {
  const auto got = FullParams(module, run), expected = FullParams(module, want);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [name, t] : expected) EXPECT_TRUE(SameBits(got.at(name), t)) << name;
}

class ResumeTest : public ::testing::TestWithParam<Plan> {};

// Stopped after step 2 of 5 (a checkpoint after every step), resumed to 5.
TEST_P(ResumeTest, ContinuesBitForBit) {
  constexpr int kSteps = 5, kStopped = 2;
  const Module m = Planned(GetParam());
  auto whole = Train(m, kSteps, {});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::string dir = FreshDir("resume");
  auto first = Train(m, kStopped, {dir, 1, 0, ""});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(ListCheckpoints(dir).size(), 2u);
  auto rest = Train(m, kSteps, {dir, 1, 2, dir});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  ASSERT_EQ(rest->losses.size(), size_t{kSteps - kStopped});
  for (int s = kStopped; s < kSteps; ++s)
    EXPECT_EQ(rest->losses[s - kStopped], whole->losses[s]) << "step " << s + 1;
  ExpectSameParams(m, *rest, *whole);
  std::vector<CheckpointEntry> kept = ListCheckpoints(dir);
  ASSERT_EQ(kept.size(), 2u);  // --keep 2
  EXPECT_EQ(kept.back().step, kSteps);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ResumeTest,
    ::testing::Values(Plan{}, Plan{"fthenb", 2, 2}, Plan{"1f1b", 2, 2}, Plan{"eager-1f1b", 1, 2},
                      Plan{"interleaved-1f1b", 1, 2, 2}, Plan{"zb-h1", 1, 2, 1, true},
                      Plan{"zb-v", 1, 2, 2, true, kV}, Plan{"dualpipe-v", 1, 2, 2, true, kV},
                      Plan{"1f1b", 2, 2, 1, false, kLoop, kBf16},
                      Plan{"1f1b", 2, 2, 1, false, kLoop, kFp16}),
    [](const auto& info) {
      const Plan& p = info.param;
      std::string name =
          StrCat(*p.kind ? p.kind : "unplanned", "_mp", p.mp, "_pp", p.pp, "_vpp", p.vpp,
                 p.training == kAdam   ? ""
                 : p.training == kBf16 ? "_bf16"
                                       : "_fp16");
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

class WarmUpTest : public ::testing::TestWithParam<Plan> {};

// A warm-up step before the first leaves no trace: the same losses and parameters.
TEST_P(WarmUpTest, LeavesNoTrace) {
  const Module m = Planned(GetParam());
  auto cold = Train(m, 3, {});
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  double warmup_ms = 0;
  auto warm = Train(m, 3, {}, /*warmup_steps=*/1, &warmup_ms);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_GT(warmup_ms, 0);
  EXPECT_EQ(warm->losses, cold->losses);
  ExpectSameParams(m, *warm, *cold);
}

// fp16's too-large loss scale makes the warm-up step skip and lower the scale: undone too.
INSTANTIATE_TEST_SUITE_P(Plans, WarmUpTest,
                         ::testing::Values(Plan{}, Plan{"1f1b", 2, 2},
                                           Plan{"1f1b", 2, 2, 1, false, kLoop, kFp16}),
                         [](const auto& info) {
                           return StrCat(info.index == 0 ? "unplanned" : "1f1b_mp2_pp2",
                                         info.param.training == kFp16 ? "_fp16" : "");
                         });

TEST(WarmUpTest, ReferenceLeavesNoTrace) {
  ops::SetKernelThreads(1);
  const Module m = Planned(Plan{"", 1, 1, 1, false, kLoop, kFp16});
  ReferenceOptions o;
  o.steps = 3;
  o.micro_batches = kMicroBatches;
  o.data_seed = kSeed;
  o.track = {"amp.loss_scale"};
  auto cold = RunReference(m, o);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  o.warmup_steps = 1;
  auto warm = RunReference(m, o);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_GT(warm->warmup_ms, 0);
  EXPECT_EQ(warm->losses, cold->losses);
  EXPECT_EQ(warm->tracked, cold->tracked);
}

// The reference runner's checkpoints resume bit for bit too, and the executor's
// unplanned one-rank run continues them: one format for both.
TEST(ResumeTest, ReferenceCheckpointsResumeInTheReferenceAndTheExecutor) {
  ops::SetKernelThreads(1);
  const Module m = Planned(Plan{});
  ReferenceOptions o;
  o.steps = 4;
  o.micro_batches = kMicroBatches;
  o.data_seed = kSeed;
  auto whole = RunReference(m, o);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::string dir = FreshDir("resume_reference");
  o.steps = 2;
  o.checkpoint.dir = dir;
  ASSERT_TRUE(RunReference(m, o).ok());
  o.steps = 4;
  o.checkpoint = {"", 0, 0, dir};
  auto rest = RunReference(m, o);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(rest->first_step, 2);
  ASSERT_EQ(rest->losses.size(), 2u);
  EXPECT_EQ(rest->losses[0], whole->losses[2]);
  EXPECT_EQ(rest->losses[1], whole->losses[3]);
  auto executor = Train(m, 4, {"", 0, 0, dir});
  ASSERT_TRUE(executor.ok()) << executor.status().ToString();
  EXPECT_EQ(executor->losses, rest->losses);
}

// Re-planned: saved under mp 2 x pp 2, resumed under other layouts. Their sums reorder
// (mp partial products, stage boundaries do not), so losses agree within f32 rounding:
// measured at most 2.6e-8 relative after 3 more steps; the bound leaves room.
constexpr double kReplanLossTolerance = 1e-5;

class ReplanTest : public ::testing::TestWithParam<Plan> {};

TEST_P(ReplanTest, ResumesUnderAnotherPlan) {
  constexpr int kSteps = 5, kStopped = 2;
  const Module saved = Planned(Plan{"1f1b", 2, 2});
  auto whole = Train(saved, kSteps, {});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::string dir = FreshDir("replan");
  ASSERT_TRUE(Train(saved, kStopped, {dir, 0, 0, ""}).ok());
  const Module other = Planned(GetParam());
  auto rest = Train(other, kSteps, {"", 0, 0, dir});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  ASSERT_EQ(rest->losses.size(), size_t{kSteps - kStopped});
  double worst = 0;
  for (int s = kStopped; s < kSteps; ++s) {
    const double want = whole->losses[s], got = rest->losses[s - kStopped];
    worst = std::max(worst, std::fabs(got - want) / want);
    EXPECT_NEAR(got, want, kReplanLossTolerance * want) << "step " << s + 1;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", worst);
  RecordProperty("worst_relative_loss_difference", text);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ReplanTest,
                         ::testing::Values(Plan{}, Plan{"1f1b", 1, 4}, Plan{"1f1b", 4, 1},
                                           Plan{"interleaved-1f1b", 2, 2, 2},
                                           Plan{"zb-v", 1, 2, 2, true, kV}),
                         [](const auto& info) {
                           const Plan& p = info.param;
                           return StrCat("mp", p.mp, "_pp", p.pp, "_vpp", p.vpp);
                         });

// Re-planned without a single rounding changed: mp 2 x pp 2 to mp 2 x pp 4 cuts the same
// mp pieces at other stage boundaries, so even the new plan trains bit for bit.
TEST(ReplanTest, OnlyStageBoundariesMovedStaysBitIdentical) {
  constexpr int kSteps = 4, kStopped = 2;
  const Module saved = Planned(Plan{"1f1b", 2, 2});
  auto whole = Train(saved, kSteps, {});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::string dir = FreshDir("replan_pp");
  ASSERT_TRUE(Train(saved, kStopped, {dir, 0, 0, ""}).ok());
  const Module other = Planned(Plan{"1f1b", 2, 4});
  auto rest = Train(other, kSteps, {"", 0, 0, dir});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  for (int s = kStopped; s < kSteps; ++s)
    EXPECT_EQ(rest->losses[s - kStopped], whole->losses[s]) << "step " << s + 1;
  const auto got = FullParams(other, *rest), want = FullParams(saved, *whole);
  for (const auto& [name, t] : want) EXPECT_TRUE(SameBits(got.at(name), t)) << name;
}

// What a resumed run refuses, before any step: another model, another data stream, a
// checkpoint at or past --steps.
TEST(ResumeTest, RefusesAnotherModelOrDataOrNothingToTrain) {
  const Module m = Planned(Plan{"1f1b", 1, 2});
  const std::string dir = FreshDir("resume_refused");
  ASSERT_TRUE(Train(m, 2, {dir, 0, 0, ""}).ok());
  const Module bf16 = Planned(Plan{"1f1b", 1, 2, 1, false, kLoop, kBf16});
  auto other = Train(bf16, 4, {"", 0, 0, dir});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is a checkpoint of another module"), std::string::npos)
      << other.status().message();
  RankRunOptions o;
  o.steps = 4;
  o.micro_batches = kMicroBatches;
  o.data.data_seed = kSeed + 1;
  o.checkpoint.resume = dir;
  auto seed = RunLocalRanks(m, o);
  ASSERT_FALSE(seed.ok());
  EXPECT_NE(seed.status().message().find("was trained with data seed 1, this run uses 2"),
            std::string::npos)
      << seed.status().message();
  auto done = Train(m, 2, {"", 0, 0, dir});
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find("--steps 2 leaves nothing to train"), std::string::npos);
}

// The embedding API: a framework saves after a step and loads into a new executor, which
// may even be a one-rank plan of a checkpoint written by mp 2 x pp 2.
StatusOr<std::vector<double>> StepExecutor(Executor& exec, int64_t first, int64_t last) {
  PW_ASSIGN_OR_RETURN(TrainingData data,
                      TrainingData::Open({2, 16, 128, kSeed, ""}));  // SmallGptConfig's sizes
  std::vector<double> losses;
  for (int64_t step = first; step < last; ++step) {
    for (int mb = 0; mb < exec.num_micro_batches(); ++mb) {
      MicroBatch batch = data.Get(step, mb);
      PW_RETURN_IF_ERROR(exec.Feed("tokens", mb, batch.tokens));
      PW_RETURN_IF_ERROR(exec.Feed("labels", mb, batch.labels));
    }
    PW_ASSIGN_OR_RETURN(StepStats stats, exec.Step());
    double sum = 0;
    for (double l : stats.losses) sum += l;
    losses.push_back(sum / static_cast<double>(stats.losses.size()));
  }
  return losses;
}

TEST(ExecutorCheckpointTest, SavesAndLoadsThroughTheEmbeddingApi) {
  const Module m = Planned(Plan{});
  ExecutorOptions options;
  options.micro_batches = kMicroBatches;
  auto whole_exec = Executor::Create(m, options);
  ASSERT_TRUE(whole_exec.ok()) << whole_exec.status().ToString();
  auto whole = StepExecutor(**whole_exec, 0, 4);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();

  options.checkpoint_dir = FreshDir("executor_api");
  auto first = std::move(Executor::Create(m, options)).value();
  ASSERT_TRUE(StepExecutor(*first, 0, 2).ok());
  ASSERT_TRUE(first->SaveCheckpoint(2).ok());
  auto second = std::move(Executor::Create(m, options)).value();
  auto step = second->LoadCheckpoint(options.checkpoint_dir);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, 2);
  auto rest = StepExecutor(*second, 2, 4);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ((*rest)[0], (*whole)[2]);
  EXPECT_EQ((*rest)[1], (*whole)[3]);
  for (const std::string& name : (*whole_exec)->PersistentNames())
    EXPECT_TRUE(SameBits(second->Fetch(name).value(), (*whole_exec)->Fetch(name).value())) << name;

  // Written by four ranks as threads (the synthetic data of the same seed), read by one.
  const std::string dir = FreshDir("executor_api_mp2pp2");
  ASSERT_TRUE(Train(Planned(Plan{"1f1b", 2, 2}), 2, {dir, 0, 0, ""}).ok());
  options.checkpoint_dir.clear();
  auto one = std::move(Executor::Create(m, options)).value();
  auto replanned = one->LoadCheckpoint(dir);
  ASSERT_TRUE(replanned.ok()) << replanned.status().ToString();
  auto after = StepExecutor(*one, 2, 3);
  ASSERT_TRUE(after.ok());
  EXPECT_NEAR((*after)[0], (*whole)[2], kReplanLossTolerance * (*whole)[2]);
}

TEST(ExecutorWarmUpTest, KeepsTheFedValuesAndUndoesItsUpdates) {
  const Module m = Planned(Plan{});
  ExecutorOptions options;
  options.micro_batches = kMicroBatches;
  auto cold = std::move(Executor::Create(m, options)).value();
  auto warm = std::move(Executor::Create(m, options)).value();
  auto data = TrainingData::Open({2, 16, 128, kSeed, ""});  // SmallGptConfig's sizes
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  for (Executor* exec : {cold.get(), warm.get()})
    for (int mb = 0; mb < kMicroBatches; ++mb) {
      MicroBatch batch = data->Get(0, mb);
      ASSERT_TRUE(exec->Feed("tokens", mb, batch.tokens).ok());
      ASSERT_TRUE(exec->Feed("labels", mb, batch.labels).ok());
    }
  auto warmed = warm->WarmUp();
  ASSERT_TRUE(warmed.ok()) << warmed.status().ToString();
  auto a = cold->Step(), b = warm->Step();  // b runs on the values fed before WarmUp
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(a->losses, b->losses);
  for (const std::string& name : cold->PersistentNames())
    EXPECT_TRUE(SameBits(cold->Fetch(name).value(), warm->Fetch(name).value())) << name;
}

}  // namespace
}  // namespace pw::testing
