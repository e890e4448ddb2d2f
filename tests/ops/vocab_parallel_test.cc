// Vocabulary-parallel embedding and cross-entropy against the single-rank ops: two ranks
// are simulated by running each rank's kernels with its index in the group and doing the
// all-reduces (max, sum) between them by hand.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/kernel.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;

// Columns [begin, begin + n) of a [rows, cols] tensor.
Tensor Columns(const Tensor& t, int64_t begin, int64_t n) {
  const int64_t cols = t.dim(-1), rows = t.numel() / cols;
  Shape shape = t.shape();
  shape.back() = n;
  Tensor out(DataType::kFloat32, shape);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(t.f32() + r * cols + begin, n, out.f32() + r * n);
  return out;
}

Tensor Rows(const Tensor& t, int64_t begin, int64_t n) {
  const int64_t cols = t.dim(-1);
  Tensor out(DataType::kFloat32, {n, cols});
  std::copy_n(t.f32() + begin * cols, n * cols, out.f32());
  return out;
}

void ExpectNear(const Tensor& got, const float* want, double tolerance, const std::string& what) {
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.f32()[i], want[i], tolerance) << what << "[" << i << "]";
}

constexpr int64_t kVocab = 10, kShard = 5, kHidden = 3;

TEST(VocabParallel, EmbeddingShardsSumToTheLookup) {
  Tensor w = RandomTensor({kVocab, kHidden}, 1);
  Tensor ids = RandomIds({2, 4}, kVocab, 2);
  TensorEnv full;
  full.Set("w", w);
  full.Set("ids", ids);
  ASSERT_TRUE(
      RunOps({MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {"o"}}})}, full).ok());
  Tensor sum(DataType::kFloat32, {2, 4, kHidden});
  for (int r = 0; r < 2; ++r) {
    TensorEnv env;
    env.Set("w", Rows(w, r * kShard, kShard));
    env.Set("ids", ids);
    Op op = MakeOp("c_embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {"o"}}});
    op.SetAttr("vocab_size", kVocab);
    GroupMember rank(r);
    ASSERT_TRUE(RunOps({op}, env, &rank).ok());
    for (int64_t i = 0; i < sum.numel(); ++i) sum.f32()[i] += env.Find("o")->f32()[i];
    // The gradient: this rank's rows only.
    env.Set("g", RandomTensor({2, 4, kHidden}, 3));
    Op grad =
        MakeOp("c_embedding_grad", {{"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}});
    grad.SetAttr("rows", kShard).SetAttr("vocab_size", kVocab);
    full.Set("g", *env.Find("g"));
    Op full_grad =
        MakeOp("embedding_grad", {{"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}});
    full_grad.SetAttr("vocab_size", kVocab);
    ASSERT_TRUE(RunOps({grad}, env, &rank).ok());
    ASSERT_TRUE(RunOps({full_grad}, full).ok());
    ExpectNear(*env.Find("dw"), full.Find("dw")->f32() + r * kShard * kHidden, 0, "dw");
  }
  ExpectNear(sum, full.Find("o")->f32(), 0, "sum of the shards' lookups");
}

TEST(VocabParallel, CrossEntropyMatchesTheSingleRankOp) {
  Tensor logits = RandomTensor({2, 3, kVocab}, 4, -3, 3);
  Tensor labels = RandomIds({2, 3}, kVocab, 5);
  labels.i64()[1] = -100;  // ignored
  Tensor dloss = RandomTensor({2, 3}, 6);
  TensorEnv full;
  full.Set("x", logits);
  full.Set("label", labels);
  full.Set("dloss", dloss);
  Op ce = MakeOp("softmax_cross_entropy", {{"Logits", {"x"}}, {"Label", {"label"}}},
                 {{"Loss", {"loss"}}, {"Softmax", {"p"}}});
  Op ce_grad = MakeOp("softmax_cross_entropy_grad",
                      {{"Softmax", {"p"}}, {"Label", {"label"}}, {"Loss@GRAD", {"dloss"}}},
                      {{"Logits@GRAD", {"dx"}}});
  ASSERT_TRUE(RunOps({ce, ce_grad}, full).ok());

  TensorEnv env[2];
  GroupMember ranks[2] = {GroupMember(0), GroupMember(1)};
  Op max = MakeOp("reduce_max", {{"X", {"x"}}}, {{"Out", {"m"}}});
  Op stats = MakeOp("c_softmax_stats", {{"Logits", {"x"}}, {"Max", {"m"}}, {"Label", {"label"}}},
                    {{"SumExp", {"s"}}, {"TargetLogit", {"t"}}});
  stats.SetAttr("vocab_size", kVocab);
  Op loss = MakeOp("c_softmax_cross_entropy",
                   {{"Logits", {"x"}},
                    {"Max", {"m"}},
                    {"SumExp", {"s"}},
                    {"TargetLogit", {"t"}},
                    {"Label", {"label"}}},
                   {{"Loss", {"loss"}}, {"Softmax", {"p"}}});
  Op grad = MakeOp("c_softmax_cross_entropy_grad",
                   {{"Softmax", {"p"}}, {"Label", {"label"}}, {"Loss@GRAD", {"dloss"}}},
                   {{"Logits@GRAD", {"dx"}}});
  // The all-reduces between the two ranks, in place on both.
  auto all_reduce = [&](const std::string& var, bool take_max) {
    float* a = env[0].Find(var)->f32();
    float* b = env[1].Find(var)->f32();
    for (int64_t i = 0; i < env[0].Find(var)->numel(); ++i)
      a[i] = b[i] = take_max ? std::max(a[i], b[i]) : a[i] + b[i];
  };
  for (int r = 0; r < 2; ++r) {
    env[r].Set("x", Columns(logits, r * kShard, kShard));
    env[r].Set("label", labels);
    env[r].Set("dloss", dloss);
    ASSERT_TRUE(RunOps({max}, env[r], &ranks[r]).ok());
  }
  all_reduce("m", true);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(RunOps({stats}, env[r], &ranks[r]).ok());
  all_reduce("s", false);
  all_reduce("t", false);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(RunOps({loss, grad}, env[r], &ranks[r]).ok());
    ExpectNear(*env[r].Find("loss"), full.Find("loss")->f32(), 1e-5, "loss");
    ExpectNear(*env[r].Find("p"), Columns(*full.Find("p"), r * kShard, kShard).f32(), 1e-6,
               "softmax");
    ExpectNear(*env[r].Find("dx"), Columns(*full.Find("dx"), r * kShard, kShard).f32(), 1e-6,
               "Logits@GRAD");
  }
  EXPECT_EQ(env[0].Find("loss")->f32()[1], 0.f);  // the ignored token
}

TEST(VocabParallel, LabelsAndIdsOutsideTheVocabularyAreErrors) {
  TensorEnv env;
  env.Set("x", RandomTensor({2, kShard}, 7));
  env.Set("m", RandomTensor({2}, 8));
  Tensor labels(DataType::kInt64, {2});
  labels.i64()[1] = kVocab;
  env.Set("label", labels);
  Op stats = MakeOp("c_softmax_stats", {{"Logits", {"x"}}, {"Max", {"m"}}, {"Label", {"label"}}},
                    {{"SumExp", {"s"}}, {"TargetLogit", {"t"}}});
  stats.SetAttr("vocab_size", kVocab);
  Status s = RunOps({stats}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("c_softmax_stats: Label[1] = 10 is out of range [0, 10)"));
  env.Set("w", RandomTensor({kShard, kHidden}, 9));
  Op emb = MakeOp("c_embedding", {{"Ids", {"label"}}, {"W", {"w"}}}, {{"Out", {"o"}}});
  emb.SetAttr("vocab_size", kVocab);
  s = RunOps({emb}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("c_embedding: Ids[1] = 10 is out of range [0, 10)"));
  // A vocabulary the shard does not divide is refused by inference.
  emb.SetAttr("vocab_size", int64_t{12});
  s = RunOps({emb}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("vocab_size 12 must be a positive multiple"));
}

}  // namespace
}  // namespace pw::testing
