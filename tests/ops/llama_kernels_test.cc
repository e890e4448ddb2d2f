// The CPU kernels of the Llama ops against independent computations: grouped-query
// attention against the multi-head attention kernel on key/value heads repeated per query
// head (past several causal row blocks), rotary embeddings against the formula and their
// inverse, and RMSNorm's unit root mean square.

#include <gtest/gtest.h>

#include <cmath>

#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  float worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(a.f32()[i] - b.f32()[i]));
  return worst;
}

struct GqaCase {
  int64_t h, g;
  bool causal;
};

class GqaAttentionKernel : public ::testing::TestWithParam<GqaCase> {};

// attention's QKV column (head, {q,k,v}, d) packs Q's head i beside K's and V's head i / r.
TEST_P(GqaAttentionKernel, MatchesAttentionOnRepeatedKvHeads) {
  const auto [h, g, causal] = GetParam();
  const int64_t B = 2, S = 70, D = 8, r = h / g;
  TensorEnv env;
  env.Set("q", RandomTensor({B, S, h * D}, 1, -2, 2));
  env.Set("k", RandomTensor({B, S, g * D}, 2, -2, 2));
  env.Set("v", RandomTensor({B, S, g * D}, 3));
  env.Set("dout", RandomTensor({B, S, h * D}, 4));
  Tensor qkv(DataType::kFloat32, {B, S, 3 * h * D});
  for (int64_t row = 0; row < B * S; ++row)
    for (int64_t head = 0; head < h; ++head)
      for (int64_t d = 0; d < D; ++d) {
        float* packed = qkv.f32() + row * 3 * h * D + head * 3 * D + d;
        const int64_t kv = (head / r) * D + d;
        packed[0] = env.Find("q")->f32()[row * h * D + head * D + d];
        packed[D] = env.Find("k")->f32()[row * g * D + kv];
        packed[2 * D] = env.Find("v")->f32()[row * g * D + kv];
      }
  env.Set("qkv", qkv);

  Op mha = MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {"mha_out"}}, {"Probs", {"mha_p"}}});
  Op mha_grad =
      MakeOp("attention_grad", {{"QKV", {"qkv"}}, {"Probs", {"mha_p"}}, {"Out@GRAD", {"dout"}}},
             {{"QKV@GRAD", {"dqkv"}}});
  Op gqa = MakeOp("gqa_attention", {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}},
                  {{"Out", {"out"}}, {"Probs", {"p"}}});
  Op gqa_grad =
      MakeOp("gqa_attention_grad",
             {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}, {"Probs", {"p"}}, {"Out@GRAD", {"dout"}}},
             {{"Q@GRAD", {"dq"}}, {"K@GRAD", {"dk"}}, {"V@GRAD", {"dv"}}});
  for (Op* op : {&mha, &mha_grad}) op->SetAttr("num_heads", h).SetAttr("causal", causal);
  for (Op* op : {&gqa, &gqa_grad})
    op->SetAttr("num_heads", h).SetAttr("kv_heads", g).SetAttr("causal", causal);
  Status s = RunOps({mha, mha_grad, gqa, gqa_grad}, env);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(MaxAbsDiff(*env.Find("out"), *env.Find("mha_out")), 1e-6);
  EXPECT_LE(MaxAbsDiff(*env.Find("p"), *env.Find("mha_p")), 1e-6);
  // dQ is the packed q part; dK and dV sum the packed parts of a group's query heads.
  Tensor dq(DataType::kFloat32, {B, S, h * D}), dk(DataType::kFloat32, {B, S, g * D}),
      dv(DataType::kFloat32, {B, S, g * D});
  const float* dqkv = env.Find("dqkv")->f32();
  for (int64_t row = 0; row < B * S; ++row)
    for (int64_t head = 0; head < h; ++head)
      for (int64_t d = 0; d < D; ++d) {
        const float* packed = dqkv + row * 3 * h * D + head * 3 * D + d;
        const int64_t kv = row * g * D + (head / r) * D + d;
        dq.f32()[row * h * D + head * D + d] = packed[0];
        dk.f32()[kv] += packed[D];
        dv.f32()[kv] += packed[2 * D];
      }
  EXPECT_LE(MaxAbsDiff(*env.Find("dq"), dq), 1e-5);
  EXPECT_LE(MaxAbsDiff(*env.Find("dk"), dk), 1e-5);
  EXPECT_LE(MaxAbsDiff(*env.Find("dv"), dv), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Heads, GqaAttentionKernel,
                         ::testing::Values(GqaCase{4, 4, true}, GqaCase{4, 2, true},
                                           GqaCase{4, 1, true}, GqaCase{6, 2, false}));

// Each head's pair (i, i + d/2) at position s turns by s · theta^(-2i/d); the inverse turns
// it back; position 0 does not move.
TEST(OpsKernel, RotaryEmbeddingRotatesPairsAndItsInverseUndoesIt) {
  const int64_t B = 2, S = 6, heads = 3, D = 8;
  const double theta = 100;
  TensorEnv env;
  env.Set("x", RandomTensor({B, S, heads * D}, 5, -2, 2));
  Op rope = MakeOp("rotary_embedding", {{"X", {"x"}}}, {{"Out", {"y"}}});
  rope.SetAttr("head_dim", D).SetAttr("theta", theta);
  Op back = MakeOp("rotary_embedding", {{"X", {"y"}}}, {{"Out", {"x_again"}}});
  back.SetAttr("head_dim", D).SetAttr("theta", theta).SetAttr("inverse", true);
  ASSERT_TRUE(RunOps({rope, back}, env).ok());
  const float* x = env.Find("x")->f32();
  const float* y = env.Find("y")->f32();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t head = 0; head < heads; ++head)
        for (int64_t i = 0; i < D / 2; ++i) {
          const int64_t at = (b * S + s) * heads * D + head * D + i;
          const double angle = s * std::pow(theta, -2.0 * i / D);
          const double x1 = x[at], x2 = x[at + D / 2];
          EXPECT_NEAR(y[at], x1 * std::cos(angle) - x2 * std::sin(angle), 1e-6);
          EXPECT_NEAR(y[at + D / 2], x2 * std::cos(angle) + x1 * std::sin(angle), 1e-6);
          if (s == 0) EXPECT_EQ(y[at], x[at]);
        }
  EXPECT_LE(MaxAbsDiff(*env.Find("x_again"), *env.Find("x")), 1e-6);
}

TEST(OpsKernel, RmsNormGivesUnitRootMeanSquare) {
  TensorEnv env;
  env.Set("x", RandomTensor({3, 16}, 6, -5.f, 5.f));
  Tensor scale(DataType::kFloat32, {16});
  scale.Fill(1);
  env.Set("g", scale);
  Op op = MakeOp("rms_norm", {{"X", {"x"}}, {"Scale", {"g"}}}, {{"Y", {"y"}}, {"Rstd", {"r"}}});
  op.SetAttr("epsilon", 1e-6);
  ASSERT_TRUE(RunOps({op}, env).ok());
  for (int r = 0; r < 3; ++r) {
    double squares = 0, x_squares = 0;
    for (int j = 0; j < 16; ++j) {
      squares += std::pow(env.Find("y")->f32()[r * 16 + j], 2) / 16;
      x_squares += std::pow(env.Find("x")->f32()[r * 16 + j], 2) / 16;
    }
    EXPECT_NEAR(squares, 1, 1e-5);
    EXPECT_NEAR(env.Find("r")->f32()[r], 1 / std::sqrt(x_squares + 1e-6), 1e-5);
  }
}

}  // namespace
}  // namespace pw::testing
