// Every grad maker and grad kernel against central finite differences.

#include <gtest/gtest.h>

#include <iterator>
#include <sstream>

#include "ir/op_def.h"
#include "ops/registry.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

const Op* FindOp(const GradCheckResult& r, const std::string& type) {
  for (const Op& op : r.grad_ops)
    if (op.type == type) return &op;
  return nullptr;
}

bool HasAlias(const GradCheckResult& r, const std::string& in, const std::string& out) {
  for (const auto& [a, b] : r.aliases)
    if (a == GradVarName(in) && b == GradVarName(out)) return true;
  return false;
}

// ---- matmul ----

struct MatmulCase {
  Shape x, y;
  bool tx, ty;
};

void PrintTo(const MatmulCase& c, std::ostream* os) {
  *os << "X " << ShapeToString(c.x) << (c.tx ? "^T" : "") << " Y " << ShapeToString(c.y)
      << (c.ty ? "^T" : "");
}

class OpsGradMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(OpsGradMatmul, MatchesFiniteDifferences) {
  const MatmulCase& p = GetParam();
  GradCheck c;
  c.op = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("trans_x", p.tx).SetAttr("trans_y", p.ty);
  c.inputs["x"] = RandomTensor(p.x, 1);
  c.inputs["y"] = RandomTensor(p.y, 2);
  bool x_shared = p.x.size() == 2 && p.y.size() > 2;
  if (x_shared) c.no_grad.insert("x");  // unsupported: X@GRAD would need a batch sum
  c.params.insert("y");
  GradCheckResult r = CheckGradients(c);
  if (p.y.size() == 2) {
    const Op* wg = FindOp(r, "matmul_weight_grad");
    ASSERT_NE(wg, nullptr);
    EXPECT_TRUE(wg->weight_grad);
    EXPECT_EQ(wg->Output(GradVarName("Y")), "y@GRAD");
  }
  if (!x_shared) {
    ASSERT_EQ(r.grad_ops[0].type, "matmul");
    EXPECT_EQ(r.grad_ops[0].Output("Out"), "x@GRAD");
    EXPECT_FALSE(r.grad_ops[0].weight_grad);
  }
}

std::vector<MatmulCase> MatmulCases() {
  std::vector<MatmulCase> cases;
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      auto t2 = [](bool t, int64_t a, int64_t b) { return t ? Shape{b, a} : Shape{a, b}; };
      auto t3 = [](bool t, int64_t n, int64_t a, int64_t b) {
        return t ? Shape{n, b, a} : Shape{n, a, b};
      };
      cases.push_back({t2(tx, 3, 4), t2(ty, 4, 5), tx, ty});        // 2-D x 2-D
      cases.push_back({t3(tx, 2, 3, 4), t2(ty, 4, 5), tx, ty});     // batched X, shared Y
      cases.push_back({t3(tx, 2, 3, 4), t3(ty, 2, 4, 5), tx, ty});  // batched both
      cases.push_back({t2(tx, 3, 4), t3(ty, 2, 4, 5), tx, ty});     // shared X, batched Y
    }
  }
  Shape x4 = {2, 2, 3, 4};  // two leading dims, flattened
  cases.push_back({x4, {4, 5}, false, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, OpsGradMatmul, ::testing::ValuesIn(MatmulCases()));

TEST(OpsGrad, MatmulSharedXNeedingGradIsUnimplemented) {
  Op op = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  Var x{.name = "x", .shape = {3, 4}}, y{.name = "y", .shape = {2, 4, 5}};
  GradContext ctx(
      op, [&](const std::string& n) { return n == "x" ? &x : &y; },
      [](const std::string&) { return true; });
  Status s = ops::Registry().Find("matmul")->grad(ctx);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
}

TEST(OpsGrad, MatmulActivationYIsNotWeightGrad) {
  GradCheck c;
  c.op = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  c.inputs["x"] = RandomTensor({3, 4}, 1);
  c.inputs["y"] = RandomTensor({4, 5}, 2);
  GradCheckResult r = CheckGradients(c);
  const Op* wg = FindOp(r, "matmul_weight_grad");
  ASSERT_NE(wg, nullptr);
  EXPECT_FALSE(wg->weight_grad);
}

// ---- embedding ----

TEST(OpsGrad, Embedding) {
  GradCheck c;
  c.op = MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {"out"}}});
  c.inputs["ids"] = RandomIds({2, 3}, 7, 3);
  c.inputs["ids"].i64()[4] = c.inputs["ids"].i64()[1];  // a repeated id accumulates
  c.inputs["w"] = RandomTensor({7, 4}, 4);
  c.params.insert("w");
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "embedding_grad");
  EXPECT_TRUE(r.grad_ops[0].weight_grad);
}

// ---- bias_add, add, gelu, scale, sum ----

TEST(OpsGrad, BiasAdd) {
  for (Shape bias : {Shape{4}, Shape{3, 4}}) {
    GradCheck c;
    c.op = MakeOp("bias_add", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"out"}}});
    c.inputs["x"] = RandomTensor({2, 3, 4}, 5);
    c.inputs["b"] = RandomTensor(bias, 6);
    c.params.insert("b");
    GradCheckResult r = CheckGradients(c);
    EXPECT_TRUE(HasAlias(r, "x", "out"));
    ASSERT_EQ(r.grad_ops.size(), 1u);
    EXPECT_EQ(r.grad_ops[0].type, "bias_add_grad");
    EXPECT_TRUE(r.grad_ops[0].weight_grad);
  }
}

TEST(OpsGrad, Add) {
  GradCheck c;
  c.op = MakeOp("add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  c.inputs["x"] = RandomTensor({2, 3}, 7);
  c.inputs["y"] = RandomTensor({2, 3}, 8);
  GradCheckResult r = CheckGradients(c);
  EXPECT_TRUE(r.grad_ops.empty());
  EXPECT_TRUE(HasAlias(r, "x", "out"));
  EXPECT_TRUE(HasAlias(r, "y", "out"));
}

TEST(OpsGrad, Gelu) {
  GradCheck c;
  c.op = MakeOp("gelu", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.inputs["x"] = RandomTensor({3, 5}, 9, -3.f, 3.f);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "gelu_grad");
}

TEST(OpsGrad, Scale) {
  GradCheck c;
  c.op = MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("scale", 2.5).SetAttr("bias", 0.3);
  c.inputs["x"] = RandomTensor({4, 3}, 10);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].attrs.GetFloat("bias", -1), 0.0);
}

TEST(OpsGrad, Sum) {
  GradCheck c;
  c.op = MakeOp("sum", {{"X", {"a", "b", "c"}}}, {{"Out", {"out"}}});
  c.inputs["a"] = RandomTensor({2, 3}, 11);
  c.inputs["b"] = RandomTensor({2, 3}, 12);
  c.inputs["c"] = RandomTensor({2, 3}, 13);
  c.no_grad.insert("b");
  GradCheckResult r = CheckGradients(c);
  EXPECT_TRUE(HasAlias(r, "a", "out"));
  EXPECT_FALSE(HasAlias(r, "b", "out"));
  EXPECT_TRUE(HasAlias(r, "c", "out"));
}

// ---- layer_norm ----

TEST(OpsGrad, LayerNorm) {
  GradCheck c;
  c.op = MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"g"}}, {"Bias", {"b"}}},
                {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Rstd", {"rstd"}}});
  c.inputs["x"] = RandomTensor({2, 3, 8}, 14, -2.f, 2.f);
  c.inputs["g"] = RandomTensor({8}, 15, 0.5f, 1.5f);
  c.inputs["b"] = RandomTensor({8}, 16);
  c.params = {"g", "b"};
  GradCheckResult r = CheckGradients(c);
  const Op* dx = FindOp(r, "layer_norm_grad");
  const Op* dp = FindOp(r, "layer_norm_param_grad");
  ASSERT_TRUE(dx && dp);
  EXPECT_FALSE(dx->weight_grad);
  EXPECT_TRUE(dp->weight_grad);
}

TEST(OpsGrad, LayerNormScaleOnly) {
  GradCheck c;
  c.op = MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"g"}}, {"Bias", {"b"}}},
                {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Rstd", {"rstd"}}});
  c.inputs["x"] = RandomTensor({5, 6}, 17, -2.f, 2.f);
  c.inputs["g"] = RandomTensor({6}, 18, 0.5f, 1.5f);
  c.inputs["b"] = RandomTensor({6}, 19);
  c.no_grad = {"x", "b"};
  c.params = {"g"};
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].FindOutput(GradVarName("Bias")), nullptr);
}

// ---- attention ----

struct AttentionCase {
  int64_t b, s, h, d;
  bool causal;
};

void PrintTo(const AttentionCase& c, std::ostream* os) {
  *os << "B=" << c.b << " S=" << c.s << " heads=" << c.h << " d=" << c.d
      << (c.causal ? " causal" : "");
}

class OpsGradAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(OpsGradAttention, MatchesFiniteDifferences) {
  const AttentionCase& p = GetParam();
  GradCheck c;
  c.op = MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {"out"}}, {"Probs", {"probs"}}});
  c.op.SetAttr("num_heads", p.h).SetAttr("causal", p.causal);
  c.inputs["qkv"] = RandomTensor({p.b, p.s, 3 * p.h * p.d}, 20);
  c.max_elements = 200;
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].attrs.GetBool("causal", !p.causal), p.causal);
  EXPECT_EQ(r.grad_ops[0].attrs.GetInt("num_heads"), p.h);
}

INSTANTIATE_TEST_SUITE_P(Shapes, OpsGradAttention,
                         ::testing::Values(AttentionCase{2, 4, 2, 3, true},
                                           AttentionCase{2, 4, 2, 3, false},
                                           AttentionCase{1, 5, 1, 4, true}));

// ---- Llama: rms_norm, swiglu, rotary_embedding, gqa_attention ----

TEST(OpsGrad, RmsNorm) {
  GradCheck c;
  c.op = MakeOp("rms_norm", {{"X", {"x"}}, {"Scale", {"g"}}}, {{"Y", {"y"}}, {"Rstd", {"rstd"}}});
  c.inputs["x"] = RandomTensor({2, 3, 8}, 40, -2.f, 2.f);
  c.inputs["g"] = RandomTensor({8}, 41, 0.5f, 1.5f);
  c.params = {"g"};
  GradCheckResult r = CheckGradients(c);
  const Op* dx = FindOp(r, "rms_norm_grad");
  const Op* dp = FindOp(r, "rms_norm_param_grad");
  ASSERT_TRUE(dx && dp);
  EXPECT_FALSE(dx->weight_grad);
  EXPECT_TRUE(dp->weight_grad);
}

TEST(OpsGrad, RmsNormScaleOnly) {
  GradCheck c;
  c.op = MakeOp("rms_norm", {{"X", {"x"}}, {"Scale", {"g"}}}, {{"Y", {"y"}}, {"Rstd", {"rstd"}}});
  c.inputs["x"] = RandomTensor({5, 6}, 42, -2.f, 2.f);
  c.inputs["g"] = RandomTensor({6}, 43, 0.5f, 1.5f);
  c.no_grad = {"x"};
  c.params = {"g"};
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "rms_norm_param_grad");
}

TEST(OpsGrad, Swiglu) {
  GradCheck c;
  c.op = MakeOp("swiglu", {{"Gate", {"gate"}}, {"Up", {"up"}}}, {{"Out", {"out"}}});
  c.inputs["gate"] = RandomTensor({3, 7}, 44, -4.f, 4.f);
  c.inputs["up"] = RandomTensor({3, 7}, 45);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "swiglu_grad");
}

TEST(OpsGrad, SwigluUpOnly) {
  GradCheck c;
  c.op = MakeOp("swiglu", {{"Gate", {"gate"}}, {"Up", {"up"}}}, {{"Out", {"out"}}});
  c.inputs["gate"] = RandomTensor({4, 5}, 46, -4.f, 4.f);
  c.inputs["up"] = RandomTensor({4, 5}, 47);
  c.no_grad = {"gate"};
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].FindOutput(GradVarName("Gate")), nullptr);
}

// The gradient of a rotation is the inverse rotation: the same op with inverse flipped.
TEST(OpsGrad, RotaryEmbedding) {
  for (bool inverse : {false, true}) {
    GradCheck c;
    c.op = MakeOp("rotary_embedding", {{"X", {"x"}}}, {{"Out", {"out"}}});
    c.op.SetAttr("head_dim", int64_t{4}).SetAttr("theta", 50.0).SetAttr("inverse", inverse);
    c.inputs["x"] = RandomTensor({2, 5, 8}, 48, -2.f, 2.f);
    GradCheckResult r = CheckGradients(c);
    ASSERT_EQ(r.grad_ops.size(), 1u);
    EXPECT_EQ(r.grad_ops[0].type, "rotary_embedding");
    EXPECT_EQ(r.grad_ops[0].attrs.GetBool("inverse", inverse), !inverse);
    EXPECT_EQ(r.grad_ops[0].attrs.GetFloat("theta"), 50.0);
  }
}

struct GqaCase {
  int64_t b, s, h, g, d;
  bool causal;
};

void PrintTo(const GqaCase& c, std::ostream* os) {
  *os << "B=" << c.b << " S=" << c.s << " heads=" << c.h << " kv_heads=" << c.g << " d=" << c.d
      << (c.causal ? " causal" : "");
}

class OpsGradGqaAttention : public ::testing::TestWithParam<GqaCase> {};

TEST_P(OpsGradGqaAttention, MatchesFiniteDifferences) {
  const GqaCase& p = GetParam();
  GradCheck c;
  c.op = MakeOp("gqa_attention", {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}},
                {{"Out", {"out"}}, {"Probs", {"probs"}}});
  c.op.SetAttr("num_heads", p.h).SetAttr("kv_heads", p.g).SetAttr("causal", p.causal);
  c.inputs["q"] = RandomTensor({p.b, p.s, p.h * p.d}, 49);
  c.inputs["k"] = RandomTensor({p.b, p.s, p.g * p.d}, 50);
  c.inputs["v"] = RandomTensor({p.b, p.s, p.g * p.d}, 51);
  c.max_elements = 120;
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].attrs.GetInt("kv_heads"), p.g);
  EXPECT_EQ(r.grad_ops[0].attrs.GetBool("causal", !p.causal), p.causal);
}

INSTANTIATE_TEST_SUITE_P(Shapes, OpsGradGqaAttention,
                         ::testing::Values(GqaCase{2, 4, 4, 2, 3, true},
                                           GqaCase{1, 5, 4, 2, 3, false},
                                           GqaCase{1, 4, 3, 1, 4, true},
                                           GqaCase{1, 4, 2, 2, 4, true}));

// ---- softmax, softmax_cross_entropy, mean ----

TEST(OpsGrad, Softmax) {
  for (bool causal : {false, true}) {
    for (Shape shape : {Shape{2, 4, 4}, Shape{2, 3, 5}}) {
      GradCheck c;
      c.op = MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"out"}}});
      c.op.SetAttr("causal", causal);
      c.inputs["x"] = RandomTensor(shape, 21, -2.f, 2.f);
      CheckGradients(c);
    }
  }
}

TEST(OpsGrad, SoftmaxCrossEntropy) {
  GradCheck c;
  c.op = MakeOp("softmax_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                {{"Loss", {"loss"}}, {"Softmax", {"softmax"}}});
  c.inputs["logits"] = RandomTensor({2, 3, 6}, 22, -2.f, 2.f);
  c.inputs["label"] = RandomIds({2, 3}, 6, 23);
  c.inputs["label"].i64()[2] = -100;  // ignored token: no loss, no gradient
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "softmax_cross_entropy_grad");
}

TEST(OpsGrad, Mean) {
  GradCheck c;
  c.op = MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.inputs["x"] = RandomTensor({3, 4}, 24);
  CheckGradients(c);
}

// ---- collectives (a null communicator is a group of one) ----

TEST(OpsGrad, CIdentity) {
  GradCheck c;
  c.op = MakeOp("c_identity", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("group", std::string("mp"));
  c.inputs["x"] = RandomTensor({2, 3}, 25);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "c_allreduce_sum");
  EXPECT_EQ(r.grad_ops[0].role, OpRole::kCommunication);
  EXPECT_EQ(r.grad_ops[0].attrs.GetString("group"), "mp");
}

// Over a group of one both are the identity; the grad makers emit each other with the
// forward op's group, axis and nranks.
TEST(OpsGrad, AllGatherAndReduceScatterAreEachOthersGradient) {
  for (const char* type : {"c_all_gather", "c_reduce_scatter_sum"}) {
    GradCheck c;
    c.op = MakeOp(type, {{"X", {"x"}}}, {{"Out", {"out"}}});
    c.op.SetAttr("group", std::string("mp")).SetAttr("axis", int64_t{1});
    c.op.SetAttr("nranks", int64_t{1});
    c.inputs["x"] = RandomTensor({2, 4, 3}, 27);
    GradCheckResult r = CheckGradients(c);
    ASSERT_EQ(r.grad_ops.size(), 1u) << type;
    const Op& g = r.grad_ops[0];
    EXPECT_EQ(g.type,
              std::string(type) == "c_all_gather" ? "c_reduce_scatter_sum" : "c_all_gather");
    EXPECT_EQ(g.role, OpRole::kBackward);
    EXPECT_EQ(g.attrs.GetString("group"), "mp");
    EXPECT_EQ(g.attrs.GetInt("axis"), 1);
    EXPECT_EQ(g.attrs.GetInt("nranks"), 1);
    EXPECT_EQ(g.Input("X"), "out@GRAD");
    EXPECT_EQ(g.Output("Out"), "x@GRAD");
  }
}

// A replicated tensor's slice: the members' gradients of their slices, gathered.
TEST(OpsGrad, CSplitGradientIsAnAllGather) {
  GradCheck c;
  c.op = MakeOp("c_split", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("group", std::string("mp")).SetAttr("axis", int64_t{0});
  c.op.SetAttr("nranks", int64_t{1});
  c.inputs["x"] = RandomTensor({4, 3}, 28);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "c_all_gather");
  EXPECT_EQ(r.grad_ops[0].attrs.GetInt("axis"), 0);
}

TEST(OpsGrad, CAllReduceSum) {
  GradCheck c;
  c.op = MakeOp("c_allreduce_sum", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.inputs["x"] = RandomTensor({2, 3}, 26);
  GradCheckResult r = CheckGradients(c);
  EXPECT_TRUE(r.grad_ops.empty());
  EXPECT_TRUE(HasAlias(r, "x", "out"));
}

// ---- cast: the gradient is cast back to X's dtype ----

TEST(OpsGrad, Cast) {
  GradCheck c;
  c.op = MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("dtype", std::string("f32"));
  c.inputs["x"] = RandomTensor({2, 3}, 30);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "cast");
  EXPECT_EQ(r.grad_ops[0].attrs.GetString("dtype"), "f32");
}

TEST(OpsGrad, CastToBf16GradIsCastBackToF32) {
  Op op = MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"out"}}});
  op.SetAttr("dtype", std::string("bf16"));
  Var x{.name = "x", .dtype = DataType::kFloat32, .shape = {2}};
  GradContext ctx(
      op, [&](const std::string& n) { return n == "x" ? &x : nullptr; },
      [](const std::string&) { return true; });
  ASSERT_TRUE(ops::Registry().Find("cast")->grad(ctx).ok());
  ASSERT_EQ(ctx.emitted().size(), 1u);
  EXPECT_EQ(ctx.emitted()[0].attrs.GetString("dtype"), "f32");
  EXPECT_EQ(ctx.emitted()[0].Input("X"), "out@GRAD");
  EXPECT_EQ(ctx.emitted()[0].Output("Out"), "x@GRAD");
}

// ---- layout ----

TEST(OpsGrad, Reshape) {
  GradCheck c;
  c.op = MakeOp("reshape", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("shape", std::vector<int64_t>{6, -1});
  c.inputs["x"] = RandomTensor({2, 3, 4}, 27);
  CheckGradients(c);
}

TEST(OpsGrad, Transpose) {
  GradCheck c;
  c.op = MakeOp("transpose", {{"X", {"x"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("perm", std::vector<int64_t>{2, 0, 1});
  c.inputs["x"] = RandomTensor({2, 3, 4}, 28);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].attrs.GetInts("perm"), (std::vector<int64_t>{1, 2, 0}));
}

TEST(OpsGrad, Split) {
  GradCheck c;
  c.op = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1", "o2"}}});
  c.op.SetAttr("axis", int64_t{1}).SetAttr("sections", std::vector<int64_t>{2, 4, 1});
  c.inputs["x"] = RandomTensor({2, 7, 3}, 29);
  CheckGradients(c);
}

TEST(OpsGrad, SplitWithUnusedOutputFillsZeros) {
  GradCheck c;
  c.op = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1"}}});
  c.op.SetAttr("axis", int64_t{-1}).SetAttr("sections", std::vector<int64_t>{3, 2});
  c.inputs["x"] = RandomTensor({4, 5}, 30);
  c.loss_outputs = {"o1"};
  GradCheckResult r = CheckGradients(c);
  ASSERT_NE(FindOp(r, "fill_constant"), nullptr);
}

TEST(OpsGrad, Concat) {
  GradCheck c;
  c.op = MakeOp("concat", {{"X", {"a", "b", "c"}}}, {{"Out", {"out"}}});
  c.op.SetAttr("axis", int64_t{-1});
  c.inputs["a"] = RandomTensor({2, 3, 1}, 31);
  c.inputs["b"] = RandomTensor({2, 3, 4}, 32);
  c.inputs["c"] = RandomTensor({2, 3, 2}, 33);
  c.no_grad.insert("b");
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "split");
}

// Every differentiable op type is covered above (c_embedding and c_softmax_cross_entropy
// against the single-rank ops in vocab_parallel_test.cc, dropout in dropout_test.cc,
// bias_gelu and bias_dropout_add in bias_fusions_test.cc); new ones must be added here.
TEST(OpsGrad, EveryOpWithAGradMakerIsChecked) {
  std::istringstream words(
      "matmul embedding bias_add add gelu scale sum layer_norm attention softmax "
      "softmax_cross_entropy mean c_identity c_allreduce_sum c_all_gather c_reduce_scatter_sum "
      "c_split "
      "reshape transpose split "
      "concat cast c_embedding c_softmax_cross_entropy rms_norm swiglu rotary_embedding "
      "gqa_attention dropout bias_gelu bias_dropout_add");
  std::set<std::string> checked{std::istream_iterator<std::string>(words), {}};
  for (const std::string& type : ops::Registry().Types()) {
    if (ops::Registry().Find(type)->grad) EXPECT_TRUE(checked.count(type)) << type;
  }
}

}  // namespace
}  // namespace pw::testing
