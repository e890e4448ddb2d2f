// Parameter gradients summed in row groups (ops/defs/row_groups.h): the partial sums each
// sequence shard computes (partial_groups), gathered in sequence order and added by
// sum_row_partials, give the bits of the whole-sequence kernel, for bias_add_grad,
// layer_norm_param_grad and rms_norm_param_grad, at every shard count that divides the
// groups. Gathering the shards in another order changes the bits (the check can fail).

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/defs/row_groups.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

constexpr int64_t kBatch = 2, kHidden = 37;

// Rows [r * len, (r + 1) * len) of axis 1 of each sample of `t`, viewed as [kBatch, seq, inner].
Tensor Shard(const Tensor& t, int64_t seq, int64_t inner, int64_t r, int64_t n, Shape shape) {
  const int64_t len = seq / n;
  Tensor out(DataType::kFloat32, std::move(shape));
  for (int64_t b = 0; b < kBatch; ++b)
    std::memcpy(out.f32() + b * len * inner, t.f32() + (b * seq + r * len) * inner,
                sizeof(float) * len * inner);
  return out;
}

// The shards' [kBatch, len, kHidden] partials joined along axis 1 in `order` (an all-gather).
Tensor Gather(const std::vector<Tensor>& parts, const std::vector<int64_t>& order) {
  const int64_t len = parts[0].dim(1);
  const int64_t n = static_cast<int64_t>(parts.size());
  Tensor out(DataType::kFloat32, {kBatch, len * n, kHidden});
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(out.f32() + (b * n + k) * len * kHidden,
                  parts[order[k]].f32() + b * len * kHidden, sizeof(float) * len * kHidden);
  return out;
}

struct Case {
  std::string type;
  std::vector<std::string> grads;  // output slots
};

class RowPartials : public ::testing::TestWithParam<Case> {};

TEST_P(RowPartials, ShardsGatheredAndSummedMatchTheWholeKernel) {
  const Case& c = GetParam();
  for (int64_t seq : {24, 12, 6, 40}) {
    const int64_t groups = ops::DefaultGroupsPerLead(seq);
    // The whole sequence: inputs, statistics, and the reference gradients.
    TensorEnv whole;
    whole.Set("x", RandomTensor({kBatch, seq, kHidden}, 1, -2, 2));
    whole.Set("s", RandomTensor({kHidden}, 2));
    whole.Set("b", RandomTensor({kHidden}, 3));
    whole.Set("g", RandomTensor({kBatch, seq, kHidden}, 4));
    Op norm =
        c.type == "rms_norm_param_grad"
            ? MakeOp("rms_norm", {{"X", {"x"}}, {"Scale", {"s"}}}, {{"Y", {"y"}}, {"Rstd", {"r"}}})
            : MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
                     {{"Y", {"y"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}});
    ASSERT_TRUE(RunOps({norm}, whole).ok());
    auto grad_op = [&](const std::string& suffix) {
      SlotList in, out;
      if (c.type == "bias_add_grad") {
        in = {{"Out@GRAD", {"g"}}};
      } else if (c.type == "rms_norm_param_grad") {
        in = {{"X", {"x"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}};
      } else {
        in = {{"X", {"x"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}};
      }
      for (const std::string& slot : c.grads) out.push_back({slot + "@GRAD", {slot + suffix}});
      Op op = MakeOp(c.type, in, out);
      if (c.type == "bias_add_grad") op.SetAttr("bias_shape", std::vector<int64_t>{kHidden});
      return op;
    };
    ASSERT_TRUE(RunOps({grad_op("")}, whole).ok());

    for (int64_t n : {1, 2, 4, 8}) {
      if (groups % n != 0) continue;
      SCOPED_TRACE(c.type + " seq " + std::to_string(seq) + " on " + std::to_string(n) + " shards");
      std::vector<std::vector<Tensor>> partials(c.grads.size());
      for (int64_t r = 0; r < n; ++r) {
        const int64_t len = seq / n;
        TensorEnv shard;
        shard.Set("x", Shard(*whole.Find("x"), seq, kHidden, r, n, {kBatch, len, kHidden}));
        shard.Set("g", Shard(*whole.Find("g"), seq, kHidden, r, n, {kBatch, len, kHidden}));
        shard.Set("r", Shard(*whole.Find("r"), seq, 1, r, n, {kBatch * len}));
        if (whole.Find("m")) shard.Set("m", Shard(*whole.Find("m"), seq, 1, r, n, {kBatch * len}));
        Op op = grad_op(".part");
        op.SetAttr("partial_groups", groups / n);
        ASSERT_TRUE(RunOps({op}, shard).ok());
        for (size_t i = 0; i < c.grads.size(); ++i) {
          const Tensor& p = *shard.Find(c.grads[i] + ".part");
          ASSERT_EQ(p.shape(), (Shape{kBatch, groups / n, kHidden}));
          partials[i].push_back(p);
        }
      }
      std::vector<int64_t> in_order(n), reversed(n);
      for (int64_t k = 0; k < n; ++k) in_order[k] = k, reversed[k] = n - 1 - k;
      for (size_t i = 0; i < c.grads.size(); ++i) {
        auto summed = [&](const std::vector<int64_t>& order) {
          TensorEnv env;
          env.Set("p", Gather(partials[i], order));
          env.Set("param", RandomTensor({kHidden}, 5));
          EXPECT_TRUE(RunOps({MakeOp("sum_row_partials", {{"X", {"p"}}, {"Param", {"param"}}},
                                     {{"Out", {"sum"}}})},
                             env)
                          .ok());
          return *env.Find("sum");
        };
        const Tensor& expected = *whole.Find(c.grads[i]);
        EXPECT_TRUE(SameBits(summed(in_order), expected)) << c.grads[i];
        if (n > 1) EXPECT_FALSE(SameBits(summed(reversed), expected)) << c.grads[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ParamGrads, RowPartials,
                         ::testing::Values(Case{"bias_add_grad", {"Bias"}},
                                           Case{"layer_norm_param_grad", {"Scale", "Bias"}},
                                           Case{"rms_norm_param_grad", {"Scale"}}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.type;
                         });

TEST(RowGroups, GroupsDivideTheLastRowAxis) {
  EXPECT_EQ(ops::GroupRows({2, 24}).count, 16);
  EXPECT_EQ(ops::GroupRows({2, 24}).rows, 3);
  EXPECT_EQ(ops::GroupRows({2, 12}).count, 8);  // gcd(12, 8) = 4 per sample
  EXPECT_EQ(ops::GroupRows({5}).count, 1);      // odd: one group
  EXPECT_EQ(ops::GroupRows({}).count, 1);       // a single row
  EXPECT_EQ(ops::GroupRows({2, 6}, 3).rows, 2);
}

TEST(RowGroups, PartialGroupsThatCutTheRowsAreRefused) {
  TensorEnv env;
  env.Set("g", RandomTensor({2, 6, 4}, 1));
  Op op = MakeOp("bias_add_grad", {{"Out@GRAD", {"g"}}}, {{"Bias@GRAD", {"db"}}});
  op.SetAttr("bias_shape", std::vector<int64_t>{4}).SetAttr("partial_groups", int64_t{4});
  Status s = RunOps({op}, env);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("partial_groups 4 must be positive and divide"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace pw::testing
