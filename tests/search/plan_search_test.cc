// The plan search behind `pipeweave tune`: its best plan is never worse than plain 1f1b,
// the pipeline it prints reproduces its predicted figures when run as opt + sim do, and
// the memory limit drops what it must.

#include "search/plan_search.h"

#include <gtest/gtest.h>

#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"
#include "tests/small_gpt.h"

namespace pw::search {
namespace {

Module SmallGpt() {
  auto built = models::BuildGpt(pw::testing::SmallGptConfig(/*mp=*/2, /*pp=*/2));
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return std::move(built).value();
}

std::shared_ptr<cost::Estimator> H100() {
  auto estimator = MakeEstimator("h100", "");
  EXPECT_TRUE(estimator.ok()) << estimator.status().ToString();
  return *estimator;
}

// Tune with `estimator` set in a copy of `options`.
StatusOr<TuneResult> TuneWith(const Module& module, std::shared_ptr<cost::Estimator> estimator,
                              TuneOptions options) {
  options.estimator = std::move(estimator);
  return Tune(module, options);
}

// What `pipeweave opt -p PIPELINE --device h100` then `pipeweave sim` predict.
cost::SimResult OptThenSim(Module module, const std::string& pipeline,
                           std::shared_ptr<cost::Estimator> estimator) {
  PassContext context(ops::Registry());
  AttachCostModel(estimator, context);
  PassManager pm(ops::Registry());
  EXPECT_TRUE(pm.AddPipeline(pipeline).ok()) << pipeline;
  auto ran = pm.Run(module, context);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  cost::SimOptions options;
  options.record_timeline = false;  // as sim without --trace or --svg
  options.steps = 2;                // tune prices two steps back to back
  auto result = cost::Simulator(estimator, ops::Registry(), options).RunSteady(module);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return *result;
}

TEST(PlanSearchTest, BestIsAtLeastPlain1F1BAndItsPipelineReproducesIt) {
  const Module module = SmallGpt();
  auto estimator = H100();
  TuneOptions options;
  options.micro_batches = 8;
  std::vector<std::string> progress;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  auto tuned = TuneWith(module, estimator, options);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  ASSERT_FALSE(tuned->best.empty());
  EXPECT_EQ(progress.size(), 3u);
  EXPECT_GT(tuned->planned, 1);
  EXPECT_GT(tuned->simulated, tuned->planned);
  EXPECT_LE(tuned->best.size(), 5u);
  const TunedPlan& best = tuned->best.front();
  ASSERT_TRUE(tuned->baseline.has_value());
  EXPECT_LE(best.step_ms, tuned->baseline->step_ms);
  for (size_t i = 1; i < tuned->best.size(); ++i)
    EXPECT_LE(tuned->best[i - 1].step_ms, tuned->best[i].step_ms);
  // The baseline is plain 1f1b, and it and the best reproduce through opt + sim (their
  // steady step and bubble over two steps, as tune prices them).
  EXPECT_NE(tuned->baseline->pipeline.find("schedule{kind=1f1b,micro-batches=8},insert-p2p"),
            std::string::npos);
  for (const TunedPlan* plan : {static_cast<const TunedPlan*>(&*tuned->baseline), &best}) {
    cost::SimResult r = OptThenSim(module, plan->pipeline, estimator);
    EXPECT_EQ(r.steady_step_time * 1e3, plan->step_ms) << plan->pipeline;
    EXPECT_EQ(r.bubble_rate, plan->bubble_rate) << plan->pipeline;
  }
}

TEST(PlanSearchTest, TheMemoryLimitDropsPlansThatHoldMore) {
  const Module module = SmallGpt();
  auto estimator = H100();
  TuneOptions options;
  options.micro_batches = 8;
  auto all = TuneWith(module, estimator, options);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  // Just under the largest peak any reported plan holds.
  int64_t largest = 0, smallest = INT64_MAX;
  for (const TunedPlan& p : all->best) {
    largest = std::max(largest, p.peak_bytes);
    smallest = std::min(smallest, p.peak_bytes);
  }
  ASSERT_LT(smallest, largest) << "the reported plans all hold the same memory";
  // The limit replaces the device's memory; the runtime's reservation still comes off it.
  const auto reserved = static_cast<int64_t>(estimator->device().memory_reserved());
  options.mem_limit_bytes = largest - 1 + reserved;
  auto limited = TuneWith(module, estimator, options);
  ASSERT_TRUE(limited.ok()) << limited.status().ToString();
  EXPECT_GT(limited->over_memory, 0);
  ASSERT_FALSE(limited->best.empty());
  for (const TunedPlan& p : limited->best) {
    EXPECT_TRUE(p.fits);
    EXPECT_LE(p.peak_bytes + reserved, options.mem_limit_bytes);
  }
}

TEST(PlanSearchTest, TriesSequenceParallelismOnTensorParallelModules) {
  const Module module = SmallGpt();  // mp 2
  auto estimator = H100();
  TuneOptions options;
  options.micro_batches = 8;
  options.top = 1000;  // every distinct plan
  auto tuned = TuneWith(module, estimator, options);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  const TunedPlan* sp = nullptr;
  for (const TunedPlan& p : tuned->best)
    if (p.pipeline.rfind("sequence-parallel,append-backward", 0) == 0 && !sp) sp = &p;
  ASSERT_NE(sp, nullptr) << "no sequence-parallel plan among " << tuned->best.size();
  // It reproduces through opt + sim (sequence parallelism's memory: SequenceParallel tests).
  cost::SimResult with = OptThenSim(module, sp->pipeline, estimator);
  EXPECT_EQ(with.steady_step_time * 1e3, sp->step_ms) << sp->pipeline;
  // Its all-gathers and reduce-scatters are reported as their own kinds, forward and backward.
  EXPECT_GT(with.exposed_by_class[static_cast<int>(cost::CommClass::kSpForward)], 0);
  EXPECT_GT(with.exposed_by_class[static_cast<int>(cost::CommClass::kSpBackward)], 0);
}

// fp16 on a pipeline: tune also plans each kind with the overflow check a step late
// (post-validate), whose ranks run into their next step; on a GPU-sized GPT that is the
// fastest plan, and it reproduces through opt + sim. A bf16 module has no check to move.
TEST(PlanSearchTest, TriesPostValidatedLossScalingOnFp16Pipelines) {
  models::GptConfig config;
  config.layers = 8;
  config.hidden = 1024;
  config.heads = 16;
  config.ffn = 4096;
  config.seq = 256;
  config.micro_batch_size = 4;
  config.pp = 4;
  auto built = models::BuildGpt(config);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto estimator = H100();
  TuneOptions options;
  options.micro_batches = 8;
  options.top = 1000;
  for (const char* dtype : {"fp16", "bf16"}) {
    Module module = *built;
    PassManager pm(ops::Registry());
    ASSERT_TRUE(
        pm.AddPipeline(StrCat("append-backward{optimizer=adam},amp{dtype=", dtype, "}")).ok());
    ASSERT_TRUE(pm.Run(module).ok());
    auto tuned = TuneWith(module, estimator, options);
    ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
    const TunedPlan* post = nullptr;
    const TunedPlan* sync = nullptr;
    for (const TunedPlan& p : tuned->best) {
      const bool validated = p.pipeline.rfind("post-validate,", 0) == 0;
      if (validated && !post) post = &p;
      if (!validated && !sync) sync = &p;
    }
    ASSERT_NE(sync, nullptr) << dtype;
    if (std::string(dtype) == "bf16") {
      EXPECT_EQ(post, nullptr) << post->pipeline;
      continue;
    }
    ASSERT_NE(post, nullptr) << "no post-validated plan among " << tuned->best.size();
    EXPECT_EQ(post, &tuned->best.front()) << tuned->best.front().pipeline;
    EXPECT_LT(post->step_ms, sync->step_ms);
    cost::SimResult r = OptThenSim(module, post->pipeline, estimator);
    EXPECT_EQ(r.steady_step_time * 1e3, post->step_ms) << post->pipeline;
  }
}

TEST(PlanSearchTest, InterleavedStagesHaveNoPlain1F1BButStillPlans) {
  auto built = models::BuildGpt(pw::testing::SmallGptConfig(/*mp=*/2, /*pp=*/2, /*vpp=*/2));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  TuneOptions options;
  options.micro_batches = 8;
  auto tuned = TuneWith(*built, H100(), options);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_FALSE(tuned->baseline.has_value());
  ASSERT_FALSE(tuned->best.empty());
  bool interleaved = false;
  for (const TunedPlan& p : tuned->best)
    interleaved |= p.pipeline.find("kind=interleaved-1f1b") != std::string::npos;
  EXPECT_TRUE(interleaved);
}

TEST(PlanSearchTest, RefusesAPlannedModuleAndNoMicroBatches) {
  auto estimator = H100();
  Module planned = SmallGpt();
  PassManager pm(ops::Registry());
  ASSERT_TRUE(
      pm.AddPipeline("append-backward,split-program,schedule{kind=1f1b,micro-batches=2}").ok());
  ASSERT_TRUE(pm.Run(planned).ok());
  TuneOptions options;
  options.micro_batches = 4;
  auto a = TuneWith(planned, estimator, options);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("already has a plan"), std::string::npos);
  options.micro_batches = 0;
  auto b = TuneWith(SmallGpt(), estimator, options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("micro-batches >= 1"), std::string::npos);
}

TEST(PlanSearchTest, RefusesWithoutAnEstimator) {
  auto tuned = Tune(SmallGpt(), TuneOptions{});
  ASSERT_FALSE(tuned.ok());
  EXPECT_NE(tuned.status().message().find("TuneOptions::estimator"), std::string::npos);
}

}  // namespace
}  // namespace pw::search
