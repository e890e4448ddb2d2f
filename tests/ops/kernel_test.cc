// CPU kernels: values against naive references and hand computations, error statuses,
// in-place updates, collectives and determinism.

#include "ops/kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/registry.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;

// Element (i, j) of the last two dims of batch b, with a 2-D tensor shared by all b.
float At(const Tensor& t, int64_t b, int64_t i, int64_t j, bool trans) {
  if (trans) std::swap(i, j);
  int64_t r = t.dim(-2), c = t.dim(-1);
  int64_t base = t.rank() > 2 ? b * r * c : 0;
  return t.f32()[base + i * c + j];
}

TEST(OpsKernel, EveryOpHasACpuKernel) {
  for (const std::string& type : ops::Registry().Types())
    EXPECT_NE(FindCpuKernel(type), nullptr) << type;
  EXPECT_EQ(FindCpuKernel("no_such_op"), nullptr);
}

TEST(OpsKernel, MatmulMatchesNaive) {
  struct Case {
    Shape x, y;
    bool tx, ty;
  };
  for (const Case& c :
       {Case{{2, 3, 4}, {4, 5}, false, false}, Case{{2, 4, 3}, {5, 4}, true, true},
        Case{{2, 3, 4}, {2, 4, 5}, false, false}, Case{{3, 4}, {2, 5, 4}, false, true}}) {
    TensorEnv env;
    env.Set("x", RandomTensor(c.x, 1));
    env.Set("y", RandomTensor(c.y, 2));
    Op op = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
    op.SetAttr("trans_x", c.tx).SetAttr("trans_y", c.ty);
    ASSERT_TRUE(RunOps({op}, env).ok());
    const Tensor& out = *env.Find("out");
    int64_t m = out.dim(-2), n = out.dim(-1);
    int64_t k = c.tx ? c.x[c.x.size() - 2] : c.x.back();
    for (int64_t b = 0; b < out.numel() / (m * n); ++b)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (int64_t p = 0; p < k; ++p)
            ref += At(*env.Find("x"), b, i, p, c.tx) * At(*env.Find("y"), b, p, j, c.ty);
          EXPECT_NEAR(out.f32()[(b * m + i) * n + j], ref, 1e-5);
        }
  }
}

TEST(OpsKernel, AttentionMatchesNaive) {
  const int64_t B = 2, S = 5, H = 2, D = 3;
  TensorEnv env;
  env.Set("qkv", RandomTensor({B, S, 3 * H * D}, 3));
  Op op = MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {"out"}}, {"Probs", {"probs"}}});
  op.SetAttr("num_heads", H);
  ASSERT_TRUE(RunOps({op}, env).ok());
  const float* qkv = env.Find("qkv")->f32();
  auto elem = [&](int64_t b, int64_t s, int64_t h, int64_t which, int64_t d) {
    return qkv[(b * S + s) * 3 * H * D + h * 3 * D + which * D + d];
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> p(S, 0);
        double mx = -1e30, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < D; ++d) p[j] += elem(b, i, h, 0, d) * elem(b, j, h, 1, d);
          p[j] /= std::sqrt(double(D));
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j < S; ++j) {
          double want = j <= i ? p[j] / sum : 0.0;
          EXPECT_NEAR(env.Find("probs")->f32()[((b * H + h) * S + i) * S + j], want, 1e-6);
        }
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] / sum * elem(b, j, h, 2, d);
          EXPECT_NEAR(env.Find("out")->f32()[(b * S + i) * H * D + h * D + d], o, 1e-5);
        }
      }
}

TEST(OpsKernel, LayerNormNormalises) {
  TensorEnv env;
  env.Set("x", RandomTensor({3, 16}, 4, -5.f, 5.f));
  Tensor g(DataType::kFloat32, {16}), b(DataType::kFloat32, {16});
  g.Fill(1);
  env.Set("g", g);
  env.Set("b", b);
  Op op = MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"g"}}, {"Bias", {"b"}}},
                 {{"Y", {"y"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}});
  ASSERT_TRUE(RunOps({op}, env).ok());
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 16; ++j) mean += env.Find("y")->f32()[r * 16 + j] / 16.0;
    for (int j = 0; j < 16; ++j) var += std::pow(env.Find("y")->f32()[r * 16 + j] - mean, 2) / 16;
    EXPECT_NEAR(mean, 0, 1e-5);
    EXPECT_NEAR(var, 1, 1e-3);
  }
}

TEST(OpsKernel, BadTokenIdIsAnError) {
  TensorEnv env;
  Tensor ids(DataType::kInt64, {2});
  ids.i64()[0] = 1;
  ids.i64()[1] = 10;
  env.Set("ids", ids);
  env.Set("w", RandomTensor({10, 4}, 5));
  Status s = RunOps({MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {"o"}}})}, env);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Ids[1] = 10 is out of range [0, 10)"));

  ids.i64()[1] = -1;
  env.Set("g", RandomTensor({2, 4}, 6));
  Op grad = MakeOp("embedding_grad", {{"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}});
  grad.SetAttr("vocab_size", int64_t{10});
  s = RunOps({grad}, env);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Ids[1] = -1"));
}

TEST(OpsKernel, BadLabelIsAnError) {
  TensorEnv env;
  env.Set("logits", RandomTensor({3, 4}, 7));
  Tensor label(DataType::kInt64, {3});
  label.i64()[0] = 0;
  label.i64()[1] = -100;  // ignore_index: allowed, loss 0
  label.i64()[2] = 3;
  env.Set("label", label);
  Op op = MakeOp("softmax_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                 {{"Loss", {"loss"}}, {"Softmax", {"sm"}}});
  ASSERT_TRUE(RunOps({op}, env).ok());
  EXPECT_EQ(env.Find("loss")->f32()[1], 0.f);
  const float* x = env.Find("logits")->f32();
  double lse = std::log(std::exp(x[0]) + std::exp(x[1]) + std::exp(x[2]) + std::exp(x[3]));
  EXPECT_NEAR(env.Find("loss")->f32()[0], lse - x[0], 1e-5);
  label.i64()[2] = 4;
  Status s = RunOps({op}, env);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Label[2] = 4"));
}

TEST(OpsKernel, WrongOutputShapeIsAnErrorNotACrash) {
  Tensor x = RandomTensor({3, 4}, 8), y = RandomTensor({4, 5}, 9), out(DataType::kFloat32, {3, 4});
  Op op = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  KernelContext ctx{op, {{&x}, {&y}}, {{&out}}};
  Status s = FindCpuKernel("matmul")(ctx);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("must be f32 [3, 5], got f32 [3, 4]"));

  KernelContext missing{op, {{&x}, {nullptr}}, {{&out}}};
  EXPECT_EQ(FindCpuKernel("matmul")(missing).code(), StatusCode::kInvalidArgument);

  Tensor bad_y = RandomTensor({5, 5}, 10);
  KernelContext mismatch{op, {{&x}, {&bad_y}}, {{&out}}};
  EXPECT_THAT(FindCpuKernel("matmul")(mismatch).message(), HasSubstr("Y [5, 5]"));
}

// A context remembers the types it last accepted and skips the op's shape inference when
// run again on tensors of those types; tensors of other types are checked again in full.
TEST(OpsKernel, AContextRunAgainOnOtherTensorsIsCheckedAgain) {
  Tensor x = RandomTensor({3, 4}, 8), y = RandomTensor({4, 5}, 9), out(DataType::kFloat32, {3, 5});
  Op op = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  std::vector<std::vector<const Tensor*>> inputs = {{&x}, {&y}};
  KernelContext ctx{op, inputs, {{&out}}};
  ASSERT_TRUE(FindCpuKernel("matmul")(ctx).ok());
  ASSERT_TRUE(FindCpuKernel("matmul")(ctx).ok());  // the same types: accepted again

  Tensor wide_y = RandomTensor({4, 6}, 10);  // Out would be [3, 6]
  ctx.inputs[1][0] = &wide_y;
  EXPECT_THAT(FindCpuKernel("matmul")(ctx).message(),
              HasSubstr("must be f32 [3, 6], got f32 [3, 5]"));
  ctx.inputs[1][0] = nullptr;
  EXPECT_THAT(FindCpuKernel("matmul")(ctx).message(), HasSubstr("has no tensor"));
  Tensor i64_out(DataType::kInt64, {3, 5});
  ctx.inputs[1][0] = &y;
  ctx.outputs[0][0] = &i64_out;
  EXPECT_EQ(FindCpuKernel("matmul")(ctx).code(), StatusCode::kInvalidArgument);
  ctx.outputs[0][0] = &out;
  EXPECT_TRUE(FindCpuKernel("matmul")(ctx).ok());
}

TEST(OpsKernel, SgdInPlace) {
  TensorEnv env;
  env.Set("p", MakeTensor({3}, {1.f, 2.f, 3.f}));
  env.Set("g", MakeTensor({3}, {0.5f, -1.f, 2.f}));
  Tensor* p = env.Find("p");
  Op op = MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}}, {{"ParamOut", {"p"}}});
  op.SetAttr("lr", 0.1);
  ASSERT_TRUE(RunOps({op}, env).ok());
  EXPECT_EQ(env.Find("p"), p);
  EXPECT_FLOAT_EQ(p->f32()[0], 1.f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(p->f32()[1], 2.f + 0.1f);
  EXPECT_FLOAT_EQ(p->f32()[2], 3.f - 0.2f);
}

TEST(OpsKernel, AdamMatchesHandComputation) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-6;
  TensorEnv env;
  env.Set("p", MakeTensor({2}, {1.f, -2.f}));
  env.Set("m1", MakeTensor({2}, {0.f, 0.f}));
  env.Set("m2", MakeTensor({2}, {0.f, 0.f}));
  env.Set("b1p", MakeTensor({1}, {float(b1)}));
  env.Set("b2p", MakeTensor({1}, {float(b2)}));
  Op op = AdamOp();
  op.SetAttr("lr", lr).SetAttr("beta1", b1).SetAttr("beta2", b2).SetAttr("epsilon", eps);
  // PyTorch's formulation, in double, over two steps.
  double p[2] = {1, -2}, m[2] = {0, 0}, v[2] = {0, 0};
  const float grads[2][2] = {{0.5f, -0.25f}, {0.1f, 0.3f}};
  for (int t = 1; t <= 2; ++t) {
    env.Set("g", MakeTensor({2}, {grads[t - 1][0], grads[t - 1][1]}));
    ASSERT_TRUE(RunOps({op}, env).ok());
    for (int i = 0; i < 2; ++i) {
      double g = grads[t - 1][i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      EXPECT_NEAR(env.Find("p")->f32()[i], p[i], 1e-6) << "step " << t;
      EXPECT_NEAR(env.Find("m1")->f32()[i], m[i], 1e-7);
      EXPECT_NEAR(env.Find("m2")->f32()[i], v[i], 1e-8);
    }
    EXPECT_NEAR(env.Find("b1p")->f32()[0], std::pow(b1, t + 1), 1e-7);
    EXPECT_NEAR(env.Find("b2p")->f32()[0], std::pow(b2, t + 1), 1e-7);
  }
}

class DoublingComm : public Communicator {
 public:
  Status AllReduceSum(std::string_view group, float* data, int64_t count) override {
    groups.emplace_back(group);
    for (int64_t i = 0; i < count; ++i) data[i] *= 2;  // two ranks holding equal values
    return OkStatus();
  }
  Status AllReduceMax(std::string_view group, float* data, int64_t count) override {
    groups.emplace_back(group);
    return OkStatus();  // two ranks holding equal values
  }
  int GroupRank(std::string_view group) const override { return 0; }
  std::vector<std::string> groups;
};

TEST(OpsKernel, AllReduceUsesTheCommunicator) {
  TensorEnv env;
  env.Set("x", MakeTensor({2}, {1.f, 3.f}));
  Op op = MakeOp("c_allreduce_sum", {{"X", {"x"}}}, {{"Out", {"y"}}});
  op.SetAttr("group", std::string("dp"));
  DoublingComm comm;
  ASSERT_TRUE(RunOps({op}, env, &comm).ok());
  EXPECT_EQ(comm.groups, std::vector<std::string>{"dp"});
  EXPECT_EQ(env.Find("y")->f32()[1], 6.f);
  EXPECT_EQ(env.Find("x")->f32()[1], 3.f);  // the input is untouched
  ASSERT_TRUE(RunOps({op}, env).ok());      // no communicator: a group of one
  EXPECT_EQ(env.Find("y")->f32()[1], 3.f);
}

TEST(OpsKernel, LayoutOpsMoveValues) {
  TensorEnv env;
  Tensor ids(DataType::kInt64, {2, 3});
  for (int i = 0; i < 6; ++i) ids.i64()[i] = i;
  env.Set("ids", ids);
  Op t = MakeOp("transpose", {{"X", {"ids"}}}, {{"Out", {"t"}}});
  t.SetAttr("perm", std::vector<int64_t>{1, 0});
  Op s = MakeOp("split", {{"X", {"t"}}}, {{"Out", {"a", "b"}}});
  s.SetAttr("axis", int64_t{0}).SetAttr("sections", std::vector<int64_t>{1, 2});
  Op c = MakeOp("concat", {{"X", {"b", "a"}}}, {{"Out", {"c"}}});
  ASSERT_TRUE(RunOps({t, s, c}, env).ok());
  // t = [[0, 3], [1, 4], [2, 5]]; c = [[1, 4], [2, 5], [0, 3]].
  std::vector<int64_t> want = {1, 4, 2, 5, 0, 3};
  EXPECT_EQ(std::vector<int64_t>(env.Find("c")->i64(), env.Find("c")->i64() + 6), want);

  Op fill = MakeOp("fill_constant", {}, {{"Out", {"f"}}});
  fill.SetAttr("shape", std::vector<int64_t>{2}).SetAttr("dtype", std::string("i64"));
  fill.SetAttr("value", 7.0);
  ASSERT_TRUE(RunOps({fill}, env).ok());
  EXPECT_EQ(env.Find("f")->i64()[1], 7);
}

TEST(OpsKernel, SumMayAliasASummand) {
  TensorEnv env;
  env.Set("a", MakeTensor({2}, {1.f, 2.f}));
  env.Set("b", MakeTensor({2}, {10.f, 20.f}));
  ASSERT_TRUE(RunOps({MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"b"}}})}, env).ok());
  EXPECT_EQ(env.Find("b")->f32()[1], 22.f);
}

// Same inputs and thread count: bit-identical results, run after run.
TEST(OpsKernel, Deterministic) {
  auto run = [](int threads) {
    ops::SetKernelThreads(threads);
    TensorEnv env;
    env.Set("x", RandomTensor({4, 64, 96}, 11));
    env.Set("g", RandomTensor({4, 64, 80}, 12));
    env.Set("qkv", RandomTensor({2, 32, 48}, 13));
    env.Set("ids", RandomIds({256}, 8, 14));
    env.Set("rows", RandomTensor({256, 16}, 15));
    Op wg = MakeOp("matmul_weight_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"Y@GRAD", {"dy"}}});
    Op attn = MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {"o"}}, {"Probs", {"p"}}});
    attn.SetAttr("num_heads", int64_t{2});
    Op eg =
        MakeOp("embedding_grad", {{"Ids", {"ids"}}, {"Out@GRAD", {"rows"}}}, {{"W@GRAD", {"dw"}}});
    eg.SetAttr("vocab_size", int64_t{8});
    EXPECT_TRUE(RunOps({wg, attn, eg}, env).ok());
    std::vector<Tensor> results;
    for (const char* name : {"dy", "o", "dw"}) results.push_back(env.Find(name)->Clone());
    return results;
  };
  for (int threads : {1, 2}) {
    std::vector<Tensor> first = run(threads), second = run(threads);
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(std::memcmp(first[i].raw(), second[i].raw(), first[i].nbytes()), 0)
          << "result " << i << " with " << threads << " threads";
    }
  }
  ops::SetKernelThreads(1);
}

}  // namespace
}  // namespace pw::testing
