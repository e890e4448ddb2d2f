// The statistics of `pipeweave ab --run`: medians, the bootstrap interval on the ratio of
// medians (reproducible, centred on a known shift, covering it), and the verdict strings.

#include "ab/ab_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace pw::ab {
namespace {

// Step times around `median` with a few slow outliers, as a loaded machine gives.
std::vector<double> StepTimes(double median, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 0.02 * median);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(median + noise(rng) + (i % 10 == 9 ? median : 0));
  return out;
}

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_TRUE(std::isnan(Median({})));
}

TEST(BootstrapTest, FindsAKnownShiftAndItsInterval) {
  std::vector<double> a = StepTimes(100, 45, 1), b = StepTimes(90, 45, 2);
  RatioInterval r = BootstrapMedianRatio({a}, {b});
  EXPECT_EQ(r.samples, 45u);
  EXPECT_NEAR(r.ratio, 0.9, 0.02);
  EXPECT_LT(r.low, r.ratio);
  EXPECT_GT(r.high, r.ratio);
  EXPECT_LT(r.low, 0.9);
  EXPECT_GT(r.high, 0.9);
  EXPECT_LT(r.high, 1);
}

TEST(BootstrapTest, SameSamplesSameInterval) {
  std::vector<double> a = StepTimes(100, 20, 3), b = StepTimes(97, 20, 4);
  RatioInterval first = BootstrapMedianRatio({a}, {b}), second = BootstrapMedianRatio({a}, {b});
  EXPECT_EQ(first.low, second.low);
  EXPECT_EQ(first.high, second.high);
  BootstrapOptions other;
  other.seed = 7;
  EXPECT_NE(BootstrapMedianRatio({a}, {b}, other).low, first.low);
}

TEST(BootstrapTest, EqualPlansContainOne) {
  std::vector<double> a = StepTimes(50, 30, 5), b = StepTimes(50, 30, 6);
  RatioInterval r = BootstrapMedianRatio({a}, {b});
  EXPECT_LE(r.low, 1);
  EXPECT_GE(r.high, 1);
}

// The width a 95 % interval should have on StepTimes(median, 40, ...), from normal theory:
// the 4 slow outliers lie above the median, so the sample median is the p = 20.5 / 36
// quantile of the 36 normal times (σ = 2 % of the median), whose standard error is
// sqrt(p (1 - p) / 36) · σ / φ(z_p); the ratio of two independent medians has √2 times that
// relative error, and the interval spans ±1.96 of it.
double ExpectedWidth(double ratio) {
  const double p = 20.5 / 36;
  double z = 0;  // z_p by Newton's method on the normal CDF
  for (int i = 0; i < 20; ++i)
    z -= (0.5 * std::erfc(-z / std::sqrt(2.0)) - p) / (std::exp(-z * z / 2) / std::sqrt(2 * M_PI));
  const double phi = std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
  const double median_error = std::sqrt(p * (1 - p) / 36) * 0.02 / phi;  // relative
  return 2 * 1.96 * std::sqrt(2.0) * median_error * ratio;
}

// Over many experiments with a true ratio of 0.95, the 95 % interval holds it most times
// (the percentile bootstrap of a median runs a little under its nominal level on small
// samples), and is as wide as the ratio's sampling error makes it, not wider: an interval
// that covers by being too wide says "no difference" where there is one.
TEST(BootstrapTest, CoversTheTrueRatioWithTheExpectedWidth) {
  BootstrapOptions options;
  options.resamples = 1000;
  int covered = 0;
  double width = 0;
  const int trials = 60;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> a = StepTimes(100, 40, 100 + 2 * t), b = StepTimes(95, 40, 101 + 2 * t);
    RatioInterval r = BootstrapMedianRatio({a}, {b}, options);
    covered += r.low <= 0.95 && 0.95 <= r.high;
    width += (r.high - r.low) / trials;
  }
  EXPECT_GE(covered, trials * 8 / 10);
  const double expected = ExpectedWidth(0.95);
  EXPECT_LT(width, 1.2 * expected) << "mean width " << width << ", expected " << expected;
  EXPECT_GT(width, 0.8 * expected) << "mean width " << width << ", expected " << expected;
}

// Rounds of 9 steps, each round at the machine's speed of its moment: slow by 1.5x in
// three rounds of ten, A's and B's apart (the speed moves within a pair of rounds), B 0.95x
// A. The steps of a round agree, so how many slow rounds each plan met moves its median: an
// interval drawn from the rounds holds the true ratio most times (56 of these 60
// experiments), where one from steps drawn as if independent held it in 40.
TEST(BootstrapTest, RoundsAtTheMachinesMomentWidenTheInterval) {
  BootstrapOptions options;
  options.resamples = 1000;
  int covered = 0;
  const int trials = 60;
  std::mt19937 rng(7);
  std::bernoulli_distribution slow(0.3);
  auto rounds = [&](double median) {
    RoundSteps out;
    for (int r = 0; r < 10; ++r) {
      const double speed = slow(rng) ? 1.5 : 1.0;
      out.push_back(StepTimes(median * speed, 9, rng()));  // 9: before StepTimes' outlier
    }
    return out;
  };
  for (int t = 0; t < trials; ++t) {
    RoundSteps a = rounds(100), b = rounds(95);
    RatioInterval r = BootstrapMedianRatio(a, b, options);
    covered += r.low <= 0.95 && 0.95 <= r.high;
  }
  EXPECT_GE(covered, trials * 8 / 10);
}

TEST(VerdictTest, FasterSlowerAndNoDifference) {
  EXPECT_EQ(Verdict({0.959, 0.937, 0.980, 45}), "B faster by 4.1 % [2.0, 6.3]");
  EXPECT_EQ(Verdict({1.030, 1.005, 1.052, 45}), "B slower by 3.0 % [0.5, 5.2]");
  EXPECT_EQ(Verdict({1.004, 0.981, 1.027, 45}), "no difference found (B/A 1.004 [0.981, 1.027])");
  EXPECT_EQ(Verdict({1, 1, 1, 6}), "no difference found (B/A 1.000 [1.000, 1.000])");
  EXPECT_EQ(Verdict({0.5, 0.4, 0.6, 2}), "no verdict from 2 timed steps per plan (6 needed)");
}

}  // namespace
}  // namespace pw::ab
