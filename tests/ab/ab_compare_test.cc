// Whether A and B train alike: losses step by step and parameters tensor by tensor.

#include "ab/ab_compare.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pw::ab {
namespace {

TEST(CompareLossesTest, BitIdentical) {
  LossComparison c = CompareLosses({{4.5, 4.25}, {4.5, 4.25}}, {{4.5, 4.25}, {4.5, 4.25}});
  EXPECT_TRUE(c.bit_identical);
  EXPECT_EQ(c.max_rel_diff, 0);
  EXPECT_EQ(c.compared, 4);
  EXPECT_EQ(c.worst_round, -1);
}

TEST(CompareLossesTest, FindsTheLargestRelativeDifference) {
  LossComparison c =
      CompareLosses({{4.0, 2.0}, {4.0, 2.0}}, {{4.0, 2.0 * (1 + 1e-9)}, {4.0 * (1 + 1e-3), 2.0}});
  EXPECT_FALSE(c.bit_identical);
  EXPECT_NEAR(c.max_rel_diff, 1e-3, 1e-6);
  EXPECT_EQ(c.worst_round, 1);
  EXPECT_EQ(c.worst_step, 0);
  EXPECT_EQ(c.worst_a, 4.0);
}

TEST(CompareLossesTest, NanOnOneSideIsInfinitelyFar) {
  LossComparison c = CompareLosses({{1.0}}, {{NAN}});
  EXPECT_FALSE(c.bit_identical);
  EXPECT_TRUE(std::isinf(c.max_rel_diff));
}

Tensor F32(std::vector<float> values) {
  Tensor t(DataType::kFloat32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.f32()[i] = values[i];
  return t;
}

TEST(CompareTensorsTest, IdenticalDifferentAndMismatched) {
  std::map<std::string, Tensor> a = {{"w", F32({1, 2, 4})}, {"b", F32({0.5f})}};
  std::map<std::string, Tensor> same = {{"w", F32({1, 2, 4})}, {"b", F32({0.5f})}};
  ParamComparison c = CompareTensors(a, same, "rank 0");
  EXPECT_TRUE(c.bit_identical);
  EXPECT_EQ(c.tensors, 2);

  std::map<std::string, Tensor> off = {{"w", F32({1, 2, 4.004f})}, {"b", F32({0.5f})}};
  c = CompareTensors(a, off, "rank 1");
  EXPECT_FALSE(c.bit_identical);
  EXPECT_NEAR(c.max_rel_diff, 1e-3, 1e-6);
  EXPECT_EQ(c.worst, "rank 1 'w'");
  EXPECT_TRUE(c.mismatch.empty());

  std::map<std::string, Tensor> missing = {{"w", F32({1, 2, 4})}};
  c = CompareTensors(a, missing, "rank 2");
  EXPECT_FALSE(c.bit_identical);
  EXPECT_EQ(c.mismatch, "rank 2: B saved no 'b'");
}

TEST(CompareTensorsTest, MergeKeepsTheWorst) {
  ParamComparison all;
  ParamComparison small;
  small.bit_identical = false;
  small.max_rel_diff = 1e-7;
  small.worst = "round 1 rank 0 'w'";
  small.tensors = 3;
  ParamComparison large = small;
  large.max_rel_diff = 1e-5;
  large.worst = "round 2 rank 3 'b'";
  all.Merge(small);
  all.Merge(large);
  all.Merge(small);
  EXPECT_FALSE(all.bit_identical);
  EXPECT_EQ(all.max_rel_diff, 1e-5);
  EXPECT_EQ(all.worst, "round 2 rank 3 'b'");
  EXPECT_EQ(all.tensors, 9);
}

}  // namespace
}  // namespace pw::ab
