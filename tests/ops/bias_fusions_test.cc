// bias_gelu and bias_dropout_add: their grads against finite differences, and the property
// a fused model leans on: each op and each grad gives, bit for bit, what the unfused ops give
// (bias_add then gelu; bias_add, dropout and add; gelu_grad or dropout_grad, then
// bias_add_grad), sharded masks and row-group partial sums included.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ops/kernel.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;

Op BiasDropoutAddOp(double p, bool seed = true) {
  SlotList in = {{"X", {"x"}}, {"Bias", {"b"}}, {"Residual", {"r"}}};
  if (seed) in.push_back({"Seed", {"seed"}});
  Op op = MakeOp("bias_dropout_add", in, {{"Out", {"out"}}});
  op.SetAttr("p", p).SetAttr("salt", int64_t{7});
  return op;
}

TEST(BiasFusions, BiasGeluGradMatchesFiniteDifferences) {
  for (Shape bias : {Shape{5}, Shape{3, 5}}) {
    GradCheck c;
    c.op = MakeOp("bias_gelu", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"out"}}});
    c.inputs["x"] = RandomTensor({2, 3, 5}, 1, -2.f, 2.f);
    c.inputs["b"] = RandomTensor(bias, 2);
    c.params.insert("b");
    GradCheckResult r = CheckGradients(c);
    ASSERT_EQ(r.grad_ops.size(), 1u);
    EXPECT_EQ(r.grad_ops[0].type, "bias_gelu_grad");
    EXPECT_EQ(r.grad_ops[0].Output(GradVarName("X")), "x@GRAD");
    EXPECT_EQ(r.grad_ops[0].Output(GradVarName("Bias")), "b@GRAD");
  }
  GradCheck bias_only;
  bias_only.op = MakeOp("bias_gelu", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"out"}}});
  bias_only.inputs["x"] = RandomTensor({4, 6}, 3);
  bias_only.inputs["b"] = RandomTensor({6}, 4);
  bias_only.params.insert("b");
  bias_only.no_grad.insert("x");
  GradCheckResult r = CheckGradients(bias_only);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_TRUE(r.grad_ops[0].Output(GradVarName("X")).empty());
  EXPECT_TRUE(r.grad_ops[0].weight_grad);  // only a parameter's gradient: deferrable
}

TEST(BiasFusions, BiasDropoutAddGradMatchesFiniteDifferences) {
  for (double p : {0.3, 0.0}) {
    SCOPED_TRACE(p);
    GradCheck c;
    c.op = BiasDropoutAddOp(p, p > 0);
    c.inputs["x"] = RandomTensor({2, 4, 6}, 5);
    c.inputs["b"] = RandomTensor({6}, 6);
    c.inputs["r"] = RandomTensor({2, 4, 6}, 7);
    if (p > 0) c.inputs["seed"] = SeedTensor(42);
    c.params.insert("b");
    GradCheckResult r = CheckGradients(c);
    ASSERT_EQ(r.grad_ops.size(), 1u);
    EXPECT_EQ(r.grad_ops[0].type, "bias_dropout_add_grad");
    EXPECT_EQ(r.grad_ops[0].attrs.GetInt("salt"), 7);
    ASSERT_EQ(r.aliases.size(), 1u);
    EXPECT_EQ(r.aliases[0].first, "r@GRAD");
    EXPECT_EQ(r.aliases[0].second, "out@GRAD");
  }
}

// bias_gelu and its grad against bias_add, gelu, gelu_grad and bias_add_grad.
TEST(BiasFusions, BiasGeluGivesTheUnfusedOpsBits) {
  TensorEnv env;
  env.Set("x", RandomTensor({2, 9, 37}, 8, -3.f, 3.f));
  env.Set("b", RandomTensor({37}, 9));
  env.Set("dy", RandomTensor({2, 9, 37}, 10));
  Op bias_add = MakeOp("bias_add", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"t"}}});
  Op gelu = MakeOp("gelu", {{"X", {"t"}}}, {{"Out", {"y_ref"}}});
  Op gelu_grad =
      MakeOp("gelu_grad", {{"X", {"t"}}, {GradVarName("Out"), {"dy"}}}, {{"X@GRAD", {"dx_ref"}}});
  Op bias_grad =
      MakeOp("bias_add_grad", {{GradVarName("Out"), {"dx_ref"}}}, {{"Bias@GRAD", {"db_ref"}}});
  bias_grad.SetAttr("bias_shape", Shape{37});
  Op fused = MakeOp("bias_gelu", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"y"}}});
  Op fused_grad =
      MakeOp("bias_gelu_grad", {{"X", {"x"}}, {"Bias", {"b"}}, {GradVarName("Out"), {"dy"}}},
             {{"X@GRAD", {"dx"}}, {"Bias@GRAD", {"db"}}});
  Op bias_only =
      MakeOp("bias_gelu_grad", {{"X", {"x"}}, {"Bias", {"b"}}, {GradVarName("Out"), {"dy"}}},
             {{"Bias@GRAD", {"db_only"}}});
  Status s = RunOps({bias_add, gelu, gelu_grad, bias_grad, fused, fused_grad, bias_only}, env);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(SameBits(*env.Find("y"), *env.Find("y_ref")));
  EXPECT_TRUE(SameBits(*env.Find("dx"), *env.Find("dx_ref")));
  EXPECT_TRUE(SameBits(*env.Find("db"), *env.Find("db_ref")));
  EXPECT_TRUE(SameBits(*env.Find("db_only"), *env.Find("db_ref")));
}

// bias_dropout_add and its grad against bias_add, dropout, add, dropout_grad and
// bias_add_grad: whole, on each sequence shard (its slice of the whole mask), and with the
// shards' row-group partial sums (partial_groups) in place of the whole sum.
TEST(BiasFusions, BiasDropoutAddGivesTheUnfusedOpsBits) {
  const Shape shape = {2, 8, 37};
  for (int shards : {1, 2, 4}) {
    SCOPED_TRACE(shards);
    const int64_t len = shape[1] / shards;
    const Tensor x = RandomTensor(shape, 11), res = RandomTensor(shape, 12);
    const Tensor dy = RandomTensor(shape, 13);
    for (int rank = 0; rank < shards; ++rank) {
      TensorEnv env;
      env.Set("x", Slice(x, 1, rank * len, len));
      env.Set("r", Slice(res, 1, rank * len, len));
      env.Set("dy", Slice(dy, 1, rank * len, len));
      env.Set("b", RandomTensor({37}, 14));
      env.Set("seed", SeedTensor(3));
      auto drop = [&](Op op) {
        op.SetAttr("p", 0.25).SetAttr("salt", int64_t{7});
        if (shards > 1)
          op.SetAttr("shard_axis", int64_t{1}).SetAttr("shard_count", int64_t{shards});
        return op;
      };
      Op bias_add = MakeOp("bias_add", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"t"}}});
      Op dropout = drop(MakeOp("dropout", {{"X", {"t"}}, {"Seed", {"seed"}}}, {{"Out", {"d"}}}));
      Op add = MakeOp("add", {{"X", {"r"}}, {"Y", {"d"}}}, {{"Out", {"y_ref"}}});
      Op dropout_grad = drop(MakeOp("dropout_grad", {{"Seed", {"seed"}}, {"Out@GRAD", {"dy"}}},
                                    {{"X@GRAD", {"dx_ref"}}}));
      Op bias_grad =
          MakeOp("bias_add_grad", {{"Out@GRAD", {"dx_ref"}}}, {{"Bias@GRAD", {"db_ref"}}});
      Op fused = BiasDropoutAddOp(0.25);
      if (shards > 1)
        fused.SetAttr("shard_axis", int64_t{1}).SetAttr("shard_count", int64_t{shards});
      Op fused_grad =
          drop(MakeOp("bias_dropout_add_grad", {{"Seed", {"seed"}}, {"Out@GRAD", {"dy"}}},
                      {{"X@GRAD", {"dx"}}, {"Bias@GRAD", {"db"}}}));
      for (Op* op : {&bias_grad, &fused_grad}) {
        op->SetAttr("bias_shape", Shape{37});
        // On a shard: its row groups' partial sums (the 8 rows are 8 groups of one).
        if (shards > 1) op->SetAttr("partial_groups", len);
      }
      GroupMember member(rank, shards);
      Status s = RunOps({bias_add, dropout, add, dropout_grad, bias_grad, fused, fused_grad}, env,
                        &member);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_TRUE(SameBits(*env.Find("out"), *env.Find("y_ref"))) << "rank " << rank;
      EXPECT_TRUE(SameBits(*env.Find("dx"), *env.Find("dx_ref"))) << "rank " << rank;
      EXPECT_TRUE(SameBits(*env.Find("db"), *env.Find("db_ref"))) << "rank " << rank;
    }
  }
}

// overlap-row-split's blocks: each of 4 row blocks, its residual's rows beside it, gives its
// rows of the whole tensor's output (its rows of the whole mask).
TEST(BiasFusions, BiasDropoutAddRowBlockGivesItsRowsOfTheWhole) {
  const Shape shape = {2, 8, 37};
  const Tensor x = RandomTensor(shape, 21), res = RandomTensor(shape, 22);
  const Tensor bias = RandomTensor({37}, 23);
  auto run = [&](const Tensor& xs, const Tensor& rs, int blocks, int block) {
    TensorEnv env;
    env.Set("x", xs);
    env.Set("r", rs);
    env.Set("b", bias);
    env.Set("seed", SeedTensor(5));
    Op op = BiasDropoutAddOp(0.25);
    if (blocks > 1)
      op.SetAttr("shard_axis", int64_t{1})
          .SetAttr("block_count", int64_t{blocks})
          .SetAttr("block", int64_t{block});
    Status s = RunOps({op}, env);
    EXPECT_TRUE(s.ok()) << s.message();
    return s.ok() ? *env.Find("out") : Tensor();
  };
  const Tensor whole = run(x, res, 1, 0);
  for (int b = 0; b < 4; ++b)
    EXPECT_TRUE(SameBits(run(Slice(x, 1, 2 * b, 2), Slice(res, 1, 2 * b, 2), 4, b),
                         Slice(whole, 1, 2 * b, 2)))
        << "block " << b;
}

// p 0: no mask, no seed; the residual add and bias still happen.
TEST(BiasFusions, BiasDropoutAddWithoutDropoutIsBiasAndResidual) {
  TensorEnv env;
  env.Set("x", MakeTensor({2, 2}, {1, 2, 3, 4}));
  env.Set("b", MakeTensor({2}, {10, 20}));
  env.Set("r", MakeTensor({2, 2}, {100, 200, 300, 400}));
  Status s = RunOps({BiasDropoutAddOp(0.0, /*seed=*/false)}, env);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(SameBits(*env.Find("out"), MakeTensor({2, 2}, {111, 222, 313, 424})));
}

TEST(BiasFusions, BadInputsAreOneLineErrors) {
  TensorEnv env;
  env.Set("x", RandomTensor({2, 4}, 15));
  env.Set("b", RandomTensor({3}, 16));
  env.Set("r", RandomTensor({2, 4}, 17));
  Status s = RunOps({MakeOp("bias_gelu", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"y"}}})}, env);
  EXPECT_THAT(s.message(), HasSubstr("Bias must equal X's trailing dims"));
  env.Set("b", RandomTensor({4}, 16));
  s = RunOps({BiasDropoutAddOp(0.1, /*seed=*/false)}, env);
  EXPECT_THAT(s.message(), HasSubstr("Seed"));
  env.Set("seed", SeedTensor(1));
  s = RunOps({BiasDropoutAddOp(1.0)}, env);
  EXPECT_THAT(s.message(), HasSubstr("p must be in [0, 1), got 1"));
  env.Set("r", RandomTensor({2, 5}, 17));
  s = RunOps({BiasDropoutAddOp(0.1)}, env);
  EXPECT_THAT(s.message(), HasSubstr("Residual"));
}

}  // namespace
}  // namespace pw::testing
