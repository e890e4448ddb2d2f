// Loss scaling's kernels: the unscale and its overflow flag, the scale's update after an
// overflow and after good steps, and optimizer updates that a set flag skips.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/kernel.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

Tensor Scalar(float v) { return MakeTensor({}, {v}); }

TEST(LossScaling, UnscalesAndFlagsNonFiniteGradients) {
  Op check = MakeOp("check_finite_and_unscale", {{"X", {"a", "b"}}, {"Scale", {"s"}}},
                    {{"Out", {"ua", "ub"}}, {"FoundInfinite", {"found"}}});
  for (float bad : {0.f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
    TensorEnv env;
    env.Set("a", MakeTensor({2}, {4.f, -8.f}));
    env.Set("b", MakeTensor({3}, {1.f, bad, 2.f}));
    env.Set("s", Scalar(4));
    ASSERT_TRUE(RunOps({check}, env).ok());
    EXPECT_EQ(env.Find("ua")->f32()[1], -2.f);
    EXPECT_EQ(env.Find("ub")->f32()[2], 0.5f);
    EXPECT_EQ(env.Find("found")->f32()[0], bad == 0 ? 0.f : 1.f) << bad;
  }
}

TEST(LossScaling, BacksOffAfterAnOverflowAndGrowsAfterGoodSteps) {
  Op update =
      MakeOp("update_loss_scaling",
             {{"FoundInfinite", {"f"}},
              {"LossScale", {"s"}},
              {"GoodSteps", {"g"}},
              {"SkippedSteps", {"k"}}},
             {{"LossScaleOut", {"s"}}, {"GoodStepsOut", {"g"}}, {"SkippedStepsOut", {"k"}}});
  update.SetAttr("growth_interval", int64_t{2}).SetAttr("growth_factor", 2.0);
  update.SetAttr("backoff_factor", 0.25);
  TensorEnv env;
  env.Set("s", Scalar(1024));
  env.Set("g", Scalar(1));
  env.Set("k", Scalar(0));
  auto step = [&](float found) {
    env.Set("f", Scalar(found));
    ASSERT_TRUE(RunOps({update}, env).ok());
  };
  step(1);  // overflow: scale cut, good steps reset, one skipped
  EXPECT_EQ(env.Find("s")->f32()[0], 256.f);
  EXPECT_EQ(env.Find("g")->f32()[0], 0.f);
  EXPECT_EQ(env.Find("k")->f32()[0], 1.f);
  step(0);
  EXPECT_EQ(env.Find("s")->f32()[0], 256.f);
  step(0);  // the second good step in a row: the scale grows
  EXPECT_EQ(env.Find("s")->f32()[0], 512.f);
  EXPECT_EQ(env.Find("g")->f32()[0], 0.f);
  EXPECT_EQ(env.Find("k")->f32()[0], 1.f);
}

TEST(LossScaling, ASetFlagSkipsTheUpdate) {
  Op adam = MakeOp("adam",
                   {{"Param", {"p"}},
                    {"Grad", {"g"}},
                    {"Moment1", {"m1"}},
                    {"Moment2", {"m2"}},
                    {"Beta1Pow", {"b1"}},
                    {"Beta2Pow", {"b2"}},
                    {"SkipUpdate", {"skip"}}},
                   {{"ParamOut", {"p"}},
                    {"Moment1Out", {"m1"}},
                    {"Moment2Out", {"m2"}},
                    {"Beta1PowOut", {"b1"}},
                    {"Beta2PowOut", {"b2"}}});
  Op sgd = MakeOp("sgd", {{"Param", {"q"}}, {"Grad", {"g"}}, {"SkipUpdate", {"skip"}}},
                  {{"ParamOut", {"q"}}});
  sgd.SetAttr("lr", 0.1);
  for (float skip : {1.f, 0.f}) {
    TensorEnv env;
    env.Set("p", MakeTensor({2}, {1.f, 2.f}));
    env.Set("q", MakeTensor({2}, {1.f, 2.f}));
    env.Set("g", MakeTensor({2}, {0.5f, -0.5f}));
    env.Set("m1", MakeTensor({2}, {0.f, 0.f}));
    env.Set("m2", MakeTensor({2}, {0.f, 0.f}));
    env.Set("b1", MakeTensor({1}, {0.9f}));
    env.Set("b2", MakeTensor({1}, {0.999f}));
    env.Set("skip", Scalar(skip));
    ASSERT_TRUE(RunOps({adam, sgd}, env).ok());
    const bool kept = skip > 0;
    EXPECT_EQ(env.Find("p")->f32()[0] == 1.f, kept);
    EXPECT_EQ(env.Find("q")->f32()[0] == 1.f, kept);
    EXPECT_EQ(env.Find("m1")->f32()[0] == 0.f, kept);
    EXPECT_EQ(env.Find("b1")->f32()[0] == 0.9f, kept);
  }
}

}  // namespace
}  // namespace pw::testing
