// The reference runner: trains tiny models (loss falls), is deterministic, and rejects
// modules it cannot run with one-line errors.

#include "executor/reference_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "models/gpt.h"
#include "models/unet.h"
#include "passes/pass_manager.h"

namespace pw {
namespace {

using ::testing::HasSubstr;

models::GptConfig TinyGpt() {
  models::GptConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn = 64;
  c.seq = 16;
  c.vocab = 32;
  c.micro_batch_size = 4;
  return c;
}

Module WithBackward(StatusOr<Module> module, const std::string& pipeline) {
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  PassManager pm;
  Status added = pm.AddPipeline(pipeline);
  EXPECT_TRUE(added.ok()) << added.ToString();
  StatusOr<bool> ran = pm.Run(*module);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  return std::move(module).value();
}

ReferenceResult Train(const Module& module, int64_t steps, int64_t micro_batches) {
  ReferenceOptions options;
  options.steps = steps;
  options.micro_batches = micro_batches;
  StatusOr<ReferenceResult> result = RunReference(module, options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? std::move(result).value() : ReferenceResult{};
}

TEST(ReferenceRunnerTest, GptLossFallsOver20Steps) {
  Module m = WithBackward(models::BuildGpt(TinyGpt()), "append-backward{optimizer=adam,lr=0.01}");
  ReferenceResult r = Train(m, 20, 2);
  ASSERT_EQ(r.losses.size(), 20u);
  ASSERT_EQ(r.step_time_ms.size(), 20u);
  const double log_vocab = std::log(32.0);
  EXPECT_NEAR(r.losses.front(), log_vocab, 0.3);  // small init: near-uniform predictions
  EXPECT_LT(r.losses.back(), 0.6 * log_vocab);
  for (double ms : r.step_time_ms) EXPECT_GT(ms, 0.0);
}

TEST(ReferenceRunnerTest, SgdAlsoLowersTheLoss) {
  Module m = WithBackward(models::BuildGpt(TinyGpt()), "append-backward{optimizer=sgd,lr=0.1}");
  ReferenceResult r = Train(m, 20, 2);
  ASSERT_EQ(r.losses.size(), 20u);
  double last5 = 0;
  for (int i = 15; i < 20; ++i) last5 += r.losses[i] / 5;
  EXPECT_LT(last5, r.losses.front() - 0.2);
}

TEST(ReferenceRunnerTest, UnetLossFalls) {
  models::UnetConfig c;
  c.layers = 4;
  c.hidden = 32;
  c.micro_batch_size = 4;
  c.seq = 8;
  c.vocab = 32;
  Module m = WithBackward(models::BuildUnet(c), "append-backward{optimizer=adam,lr=0.01}");
  ReferenceResult r = Train(m, 20, 2);
  ASSERT_EQ(r.losses.size(), 20u);
  EXPECT_LT(r.losses.back(), 0.5 * std::log(32.0));
}

TEST(ReferenceRunnerTest, RunsAreBitReproducible) {
  Module m = WithBackward(models::BuildGpt(TinyGpt()), "append-backward{optimizer=adam,lr=0.01}");
  ReferenceResult a = Train(m, 3, 2), b = Train(m, 3, 2);
  EXPECT_EQ(a.losses, b.losses);
}

// Kernels split a GEMM's rows and columns, not its sums, among threads: the losses of a
// 1-thread and a 2-thread run are the same bits.
TEST(ReferenceRunnerTest, ThreadCountKeepsEveryBit) {
  models::GptConfig config = TinyGpt();
  config.hidden = 128;
  config.ffn = 512;
  config.seq = 64;
  Module m = WithBackward(models::BuildGpt(config), "append-backward{optimizer=adam,lr=0.01}");
  ReferenceOptions options;
  options.steps = 2;
  options.micro_batches = 2;
  options.threads = 1;
  StatusOr<ReferenceResult> one = RunReference(m, options);
  options.threads = 2;
  StatusOr<ReferenceResult> two = RunReference(m, options);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->losses, two->losses);
}

TEST(ReferenceRunnerTest, StepCallbackSeesEveryStep) {
  Module m = WithBackward(models::BuildGpt(TinyGpt()), "append-backward");
  ReferenceOptions options;
  options.steps = 3;
  std::vector<int64_t> steps;
  options.on_step = [&](int64_t step, double loss, double ms) { steps.push_back(step); };
  ASSERT_TRUE(RunReference(m, options).ok());
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2}));
}

void ExpectError(const Module& m, const std::string& message) {
  ReferenceOptions options;
  StatusOr<ReferenceResult> r = RunReference(m, options);
  ASSERT_FALSE(r.ok()) << message;
  EXPECT_THAT(r.status().message(), HasSubstr(message));
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

TEST(ReferenceRunnerTest, RejectsParallelLayouts) {
  models::GptConfig c = TinyGpt();
  c.mp = 2;
  ExpectError(*models::BuildGpt(c), "mp=1, pp=1");
  c = TinyGpt();
  c.pp = 2;
  ExpectError(*models::BuildGpt(c), "mp=1, pp=1");
}

TEST(ReferenceRunnerTest, RejectsForwardOnlyModules) {
  ExpectError(*models::BuildGpt(TinyGpt()), "no backward ops");
}

TEST(ReferenceRunnerTest, RejectsMissingInputs) {
  Module m = WithBackward(models::BuildGpt(TinyGpt()), "append-backward");
  m.metadata.Set("inputs", std::vector<std::string>{"tokens", "labels", "mask"});
  ExpectError(m, "module input 'mask'");
  m.metadata.Set("inputs", std::vector<std::string>{"tokens"});
  ExpectError(m, "'labels'");
}

TEST(ReferenceRunnerTest, RejectsByteDataForSmallVocabs) {
  Module m = WithBackward(models::BuildGpt(TinyGpt()), "append-backward");
  ReferenceOptions options;
  options.data_file = std::string(PW_SOURCE_DIR) + "/README.md";
  StatusOr<ReferenceResult> r = RunReference(m, options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("vocab >= 256"));
}

}  // namespace
}  // namespace pw
