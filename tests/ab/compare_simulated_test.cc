// The A/B engine as a library (ab/compare.h): plans made from pipelines, both simulated,
// each side's figures those of its own plan, errors that name the side.
// (CompareMeasured runs in tests/cli's `ab --run` cases and in the install test.)

#include <gtest/gtest.h>

#include "ab/compare.h"
#include "models/gpt.h"
#include "passes/cost_inputs.h"
#include "tests/small_gpt.h"

namespace pw::ab {
namespace {

constexpr const char* kOneFOneB =
    "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p";
constexpr const char* kFThenB =
    "append-backward,split-program,schedule{kind=fthenb,micro-batches=4},insert-p2p";

Module TwoStageGpt() {
  auto built = models::BuildGpt(pw::testing::SmallGptConfig(/*mp=*/1, /*pp=*/2));
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return std::move(built).value();
}

std::shared_ptr<cost::Estimator> H100() {
  auto estimator = MakeEstimator("h100", "");
  EXPECT_TRUE(estimator.ok()) << estimator.status().ToString();
  return *estimator;
}

TEST(CompareSimulatedTest, EachSideIsItsOwnPlanSimulated) {
  const Module module = TwoStageGpt();
  auto estimator = H100();
  auto a = PlanWithPipeline(module, kOneFOneB, estimator);
  auto b = PlanWithPipeline(module, kFThenB, estimator);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  SimulateOptions options;
  options.estimator = estimator;
  auto compared = CompareSimulated(*a, *b, options);
  ASSERT_TRUE(compared.ok()) << compared.status().ToString();
  auto alone_a = SimulatePlan(*a, estimator, 1, false);
  auto alone_b = SimulatePlan(*b, estimator, 1, false);
  ASSERT_TRUE(alone_a.ok() && alone_b.ok());
  EXPECT_EQ(compared->report.device, estimator->device().name());
  EXPECT_DOUBLE_EQ(compared->report.a.step_ms, alone_a->figures.step_ms);
  EXPECT_DOUBLE_EQ(compared->report.b.step_ms, alone_b->figures.step_ms);
  EXPECT_EQ(compared->report.a.peak_bytes, alone_a->figures.peak_bytes);
  EXPECT_EQ(compared->report.b.peak_bytes, alone_b->figures.peak_bytes);
  // The two schedules differ where they should: F-then-B holds every micro-batch's
  // activations at once, so its first stage peaks higher than under 1F1B.
  ASSERT_EQ(compared->report.a.peak_bytes.size(), 2u);
  EXPECT_GT(compared->report.b.peak_bytes[0], compared->report.a.peak_bytes[0]);
  // What the CLI prints is built from it as is.
  AbReport report;
  report.sim = compared->report;
  EXPECT_NE(AbReportJson(report).find("\"device\": \"h100-sxm\""), std::string::npos)
      << AbReportJson(report);
}

TEST(CompareSimulatedTest, ErrorsNameTheSide) {
  const Module module = TwoStageGpt();
  auto bad = PlanWithPipeline(module, "no-such-pass", nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-pass"), std::string::npos);

  auto a = PlanWithPipeline(module, kOneFOneB, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto refused = CompareSimulated(*a, *a, SimulateOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("estimator"), std::string::npos);

  // A plan the launcher would refuse (stages that never send each other their
  // activations) is refused before any process starts, naming its side.
  auto no_p2p =
      PlanWithPipeline(module, "append-backward,split-program,schedule{kind=1f1b,micro-batches=4}");
  ASSERT_TRUE(no_p2p.ok()) << no_p2p.status().ToString();
  EXPECT_TRUE(CheckRunnable(*a, *a, /*strict_events=*/false).ok());
  Status b_refused = CheckRunnable(*a, *no_p2p, /*strict_events=*/false);
  ASSERT_FALSE(b_refused.ok());
  EXPECT_NE(b_refused.message().find("plan B"), std::string::npos) << b_refused.ToString();
  Status a_refused = CheckRunnable(*no_p2p, *a, /*strict_events=*/false);
  ASSERT_FALSE(a_refused.ok());
  EXPECT_NE(a_refused.message().find("plan A"), std::string::npos) << a_refused.ToString();
}

}  // namespace
}  // namespace pw::ab
