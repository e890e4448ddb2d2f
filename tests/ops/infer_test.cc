// Shape and dtype inference, signature checks, the registry's contents and cost counts.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <sstream>

#include "ir/op_def.h"
#include "ops/registry.h"

namespace pw {
namespace {

using ::testing::HasSubstr;

// The outcome of inference (and the cost count) for one op. InferContext refers to its
// op, so everything is read out while the op is alive.
struct Inferred {
  Status status;
  Op op;
  std::vector<std::vector<TensorType>> outputs;
  OpCost cost;

  TensorType Out(std::string_view slot, size_t i = 0) const {
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (op.outputs[k].name == slot) return outputs[k][i];
    return {};
  }
};

// Declares vars of the given types and runs inference on `op`.
Inferred Infer(const Op& op, const std::map<std::string, TensorType>& types) {
  Inferred result{OkStatus(), op, {}, {}};
  std::map<std::string, Var> vars;
  for (const auto& [name, t] : types)
    vars[name] = Var{.name = name, .dtype = t.dtype, .shape = t.shape};
  const OpDef* def = ops::Registry().Find(op.type);
  if (!def) {
    result.status = NotFound("no op ", op.type);
    return result;
  }
  auto ctx = InferOpTypes(*def, result.op, [&](const std::string& n) -> const Var* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : &it->second;
  });
  result.status = ctx.status();
  if (ctx.ok()) {
    result.outputs = ctx->outputs();
    if (def->cost) result.cost = def->cost(*ctx);
  }
  return result;
}

TensorType F32(Shape s) { return {DataType::kFloat32, std::move(s)}; }
TensorType I64(Shape s) { return {DataType::kInt64, std::move(s)}; }

Op Matmul(bool tx = false, bool ty = false) {
  Op op;
  op.type = "matmul";
  op.SetInput("X", {"x"}).SetInput("Y", {"y"}).SetOutput("Out", {"out"});
  op.SetAttr("trans_x", tx).SetAttr("trans_y", ty);
  return op;
}

TEST(OpsInfer, RegistryListsEveryOp) {
  std::istringstream words(
      "adam add attention attention_grad bias_add bias_add_grad bias_dropout_add "
      "bias_dropout_add_grad bias_gelu bias_gelu_grad c_all_gather c_allreduce_coalesced "
      "c_allreduce_max "
      "c_allreduce_sum c_embedding c_embedding_grad c_identity c_member_concat c_member_sum "
      "c_reduce_scatter_coalesced c_reduce_scatter_sum c_shift c_softmax_cross_entropy "
      "c_softmax_cross_entropy_grad c_softmax_stats c_split c_sync_shards cast "
      "check_finite_and_unscale concat copy_unless "
      "dropout dropout_grad embedding embedding_grad "
      "fill_constant gelu gelu_grad gqa_attention gqa_attention_grad "
      "layer_norm layer_norm_grad layer_norm_param_grad matmul matmul_weight_grad "
      "mean mean_grad reduce_max reshape rms_norm rms_norm_grad rms_norm_param_grad "
      "rotary_embedding scale sgd softmax softmax_cross_entropy "
      "softmax_cross_entropy_grad softmax_grad split sum sum_row_partials swiglu swiglu_grad "
      "transpose "
      "update_loss_scaling");
  std::vector<std::string> expected{std::istream_iterator<std::string>(words), {}};
  EXPECT_EQ(ops::Registry().Types(), expected);
  for (const std::string& type : expected) {
    const OpDef* def = ops::Registry().Find(type);
    EXPECT_TRUE(def->infer) << type;
    EXPECT_TRUE(def->cost) << type;
    EXPECT_FALSE(def->summary.empty()) << type;
  }
}

TEST(OpsInfer, MatmulShapes) {
  auto r = Infer(Matmul(), {{"x", F32({2, 3, 4})}, {"y", F32({4, 5})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 3, 5}));
  r = Infer(Matmul(true, true), {{"x", F32({2, 4, 3})}, {"y", F32({2, 5, 4})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 3, 5}));
}

TEST(OpsInfer, MatmulMismatchNamesSlotsAndShapes) {
  auto r = Infer(Matmul(), {{"x", F32({2, 3, 4})}, {"y", F32({5, 6})}});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status.message(), HasSubstr("X [2, 3, 4]"));
  EXPECT_THAT(r.status.message(), HasSubstr("Y [5, 6]"));
}

TEST(OpsInfer, MatmulBadRankAndDtype) {
  auto r = Infer(Matmul(), {{"x", F32({4})}, {"y", F32({4, 5})}});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status.message(), HasSubstr("X"));
  r = Infer(Matmul(), {{"x", F32({3, 4})}, {"y", I64({4, 5})}});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status.message(), HasSubstr("matmul: Y"));
  EXPECT_THAT(r.status.message(), HasSubstr("i64"));
  r = Infer(Matmul(), {{"x", F32({2, 3, 4})}, {"y", F32({3, 4, 5})}});
  EXPECT_THAT(r.status.message(), HasSubstr("leading"));
}

TEST(OpsInfer, SignatureChecks) {
  Op op = Matmul();
  op.SetInput("Z", {"x"});
  auto r = Infer(op, {{"x", F32({3, 4})}, {"y", F32({4, 5})}});
  EXPECT_THAT(r.status.message(), HasSubstr("unknown input slot Z"));

  op = Matmul();
  op.inputs.pop_back();  // no Y
  r = Infer(op, {{"x", F32({3, 4})}});
  EXPECT_THAT(r.status.message(), HasSubstr("input Y is missing"));

  op = Matmul();
  op.SetAttr("trans_x", int64_t{1});
  r = Infer(op, {{"x", F32({3, 4})}, {"y", F32({4, 5})}});
  EXPECT_THAT(r.status.message(), HasSubstr("trans_x"));

  Op attn;
  attn.type = "attention";
  attn.SetInput("QKV", {"qkv"}).SetOutput("Out", {"o"}).SetOutput("Probs", {"p"});
  r = Infer(attn, {{"qkv", F32({2, 4, 12})}});
  EXPECT_THAT(r.status.message(), HasSubstr("attribute num_heads is missing"));
}

TEST(OpsInfer, EmbeddingAndLoss) {
  Op emb;
  emb.type = "embedding";
  emb.SetInput("Ids", {"ids"}).SetInput("W", {"w"}).SetOutput("Out", {"out"});
  auto r = Infer(emb, {{"ids", I64({2, 3})}, {"w", F32({10, 8})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Out"), F32({2, 3, 8}));
  r = Infer(emb, {{"ids", F32({2, 3})}, {"w", F32({10, 8})}});
  EXPECT_THAT(r.status.message(), HasSubstr("embedding: Ids"));

  Op sce;
  sce.type = "softmax_cross_entropy";
  sce.SetInput("Logits", {"l"}).SetInput("Label", {"y"});
  sce.SetOutput("Loss", {"loss"}).SetOutput("Softmax", {"sm"});
  r = Infer(sce, {{"l", F32({2, 3, 10})}, {"y", I64({2, 3})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Loss"), F32({2, 3}));
  EXPECT_EQ(r.Out("Softmax"), F32({2, 3, 10}));
  r = Infer(sce, {{"l", F32({2, 3, 10})}, {"y", I64({3, 2})}});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status.message(), HasSubstr("Label [3, 2]"));
  EXPECT_THAT(r.status.message(), HasSubstr("Logits [2, 3, 10]"));
}

TEST(OpsInfer, LayerNormAndBias) {
  Op ln;
  ln.type = "layer_norm";
  ln.SetInput("X", {"x"}).SetInput("Scale", {"g"}).SetInput("Bias", {"b"});
  ln.SetOutput("Y", {"y"}).SetOutput("Mean", {"m"}).SetOutput("Rstd", {"r"});
  auto r = Infer(ln, {{"x", F32({2, 3, 8})}, {"g", F32({8})}, {"b", F32({8})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Mean"), F32({6}));
  r = Infer(ln, {{"x", F32({2, 3, 8})}, {"g", F32({7})}, {"b", F32({8})}});
  EXPECT_THAT(r.status.message(), HasSubstr("Scale [7]"));

  Op ba;
  ba.type = "bias_add";
  ba.SetInput("X", {"x"}).SetInput("Bias", {"b"}).SetOutput("Out", {"o"});
  EXPECT_TRUE(Infer(ba, {{"x", F32({2, 3, 4})}, {"b", F32({3, 4})}}).status.ok());
  r = Infer(ba, {{"x", F32({2, 3, 4})}, {"b", F32({4, 3})}});
  EXPECT_THAT(r.status.message(), HasSubstr("Bias [4, 3]"));
}

TEST(OpsInfer, AttentionShapes) {
  Op attn;
  attn.type = "attention";
  attn.SetInput("QKV", {"qkv"}).SetOutput("Out", {"o"}).SetOutput("Probs", {"p"});
  attn.SetAttr("num_heads", int64_t{2});
  auto r = Infer(attn, {{"qkv", F32({2, 4, 24})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Out"), F32({2, 4, 8}));
  EXPECT_EQ(r.Out("Probs"), F32({2, 2, 4, 4}));
  r = Infer(attn, {{"qkv", F32({2, 4, 20})}});
  EXPECT_THAT(r.status.message(), HasSubstr("attention: QKV [2, 4, 20]"));
}

TEST(OpsInfer, GqaAttentionShapesAndErrors) {
  Op attn;
  attn.type = "gqa_attention";
  attn.SetInput("Q", {"q"}).SetInput("K", {"k"}).SetInput("V", {"v"});
  attn.SetOutput("Out", {"o"}).SetOutput("Probs", {"p"});
  attn.SetAttr("num_heads", int64_t{4}).SetAttr("kv_heads", int64_t{2});
  auto r = Infer(attn, {{"q", F32({2, 5, 32})}, {"k", F32({2, 5, 16})}, {"v", F32({2, 5, 16})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 5, 32}));
  EXPECT_EQ(r.Out("Probs"), F32({2, 4, 5, 5}));
  r = Infer(attn, {{"q", F32({2, 5, 32})}, {"k", F32({2, 5, 8})}, {"v", F32({2, 5, 8})}});
  EXPECT_THAT(r.status.message(), HasSubstr("kv_heads · 8"));
  attn.SetAttr("kv_heads", int64_t{3});
  r = Infer(attn, {{"q", F32({2, 5, 24})}, {"k", F32({2, 5, 18})}, {"v", F32({2, 5, 18})}});
  EXPECT_THAT(r.status.message(), HasSubstr("kv_heads 3 must divide num_heads 4"));
}

TEST(OpsInfer, RotaryNeedsAnEvenHeadDimDividingTheWidth) {
  Op rope;
  rope.type = "rotary_embedding";
  rope.SetInput("X", {"x"}).SetOutput("Out", {"o"});
  rope.SetAttr("head_dim", int64_t{4});
  auto r = Infer(rope, {{"x", F32({2, 5, 12})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 5, 12}));
  r = Infer(rope, {{"x", F32({2, 5, 10})}});
  EXPECT_THAT(r.status.message(), HasSubstr("not a multiple of head_dim 4"));
  rope.SetAttr("head_dim", int64_t{3});
  r = Infer(rope, {{"x", F32({2, 5, 12})}});
  EXPECT_THAT(r.status.message(), HasSubstr("head_dim must be a positive even number, got 3"));
}

TEST(OpsInfer, RmsNormAndSwiglu) {
  Op rms;
  rms.type = "rms_norm";
  rms.SetInput("X", {"x"}).SetInput("Scale", {"g"}).SetOutput("Y", {"y"}).SetOutput("Rstd", {"r"});
  auto r = Infer(rms, {{"x", F32({2, 3, 8})}, {"g", F32({8})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Rstd"), F32({6}));
  r = Infer(rms, {{"x", F32({2, 3, 8})}, {"g", F32({7})}});
  EXPECT_THAT(r.status.message(), HasSubstr("Scale [7]"));
  Op swiglu;
  swiglu.type = "swiglu";
  swiglu.SetInput("Gate", {"a"}).SetInput("Up", {"b"}).SetOutput("Out", {"o"});
  r = Infer(swiglu, {{"a", F32({2, 6})}, {"b", F32({2, 5})}});
  EXPECT_THAT(r.status.message(), HasSubstr("shapes differ"));
}

TEST(OpsInfer, LayoutOps) {
  Op reshape;
  reshape.type = "reshape";
  reshape.SetInput("X", {"x"}).SetOutput("Out", {"o"});
  reshape.SetAttr("shape", std::vector<int64_t>{-1, 4});
  auto r = Infer(reshape, {{"x", F32({2, 3, 4})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Out"), F32({6, 4}));
  reshape.SetAttr("shape", std::vector<int64_t>{5, -1});
  EXPECT_EQ(Infer(reshape, {{"x", F32({2, 3, 4})}}).status.code(), StatusCode::kInvalidArgument);

  Op split;
  split.type = "split";
  split.SetInput("X", {"x"}).SetOutput("Out", {"a", "b"});
  split.SetAttr("axis", int64_t{1}).SetAttr("sections", std::vector<int64_t>{1, 2});
  r = Infer(split, {{"x", F32({4, 3})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Out", 1), F32({4, 2}));
  split.SetAttr("sections", std::vector<int64_t>{1, 1});
  EXPECT_THAT(Infer(split, {{"x", F32({4, 3})}}).status.message(), HasSubstr("sections"));

  Op concat;
  concat.type = "concat";
  concat.SetInput("X", {"a", "b"}).SetOutput("Out", {"o"});
  concat.SetAttr("axis", int64_t{0});
  r = Infer(concat, {{"a", F32({1, 3})}, {"b", F32({2, 3})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Out"), F32({3, 3}));
  r = Infer(concat, {{"a", F32({1, 3})}, {"b", F32({2, 4})}});
  EXPECT_THAT(r.status.message(), HasSubstr("X[1] [2, 4]"));

  Op transpose;
  transpose.type = "transpose";
  transpose.SetInput("X", {"x"}).SetOutput("Out", {"o"});
  transpose.SetAttr("perm", std::vector<int64_t>{0, 0});
  EXPECT_THAT(Infer(transpose, {{"x", F32({2, 3})}}).status.message(), HasSubstr("perm"));
}

TEST(OpsInfer, FillConstantAndOptimizers) {
  Op fill;
  fill.type = "fill_constant";
  fill.SetOutput("Out", {"o"});
  fill.SetAttr("shape", std::vector<int64_t>{2, 2}).SetAttr("dtype", std::string("i64"));
  auto r = Infer(fill, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Out"), I64({2, 2}));
  fill.SetAttr("dtype", std::string("f64"));
  EXPECT_THAT(Infer(fill, {}).status.message(), HasSubstr("f64"));

  const OpDef* sgd = ops::Registry().Find("sgd");
  ASSERT_EQ(sgd->inplace.size(), 1u);
  EXPECT_EQ(sgd->inplace[0], (std::pair<std::string, std::string>{"ParamOut", "Param"}));
  EXPECT_EQ(ops::Registry().Find("adam")->inplace.size(), 5u);
  EXPECT_TRUE(ops::Registry().Find("c_allreduce_sum")->is_communication);
}

// A dp bucket: each Out takes its X's type; one dtype and as many Out as X, else one line.
TEST(OpsInfer, CoalescedAllReduceKeepsEachTypeAndOneDtype) {
  Op op;
  op.type = "c_allreduce_coalesced";
  op.SetInput("X", {"a", "b"}).SetOutput("Out", {"a", "b"});
  op.SetAttr("group", std::string("dp"));
  auto r = Infer(op, {{"a", F32({4, 3})}, {"b", F32({7})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out", 0), F32({4, 3}));
  EXPECT_EQ(r.Out("Out", 1), F32({7}));
  EXPECT_TRUE(ops::Registry().Find("c_allreduce_coalesced")->collective);
  EXPECT_EQ(
      Infer(op, {{"a", F32({4, 3})}, {"b", TensorType{DataType::kBFloat16, {7}}}}).status.message(),
      "c_allreduce_coalesced: X[1] is bf16, X[0] f32: a bucket holds one dtype");
  op.SetOutput("Out", {"a"});
  EXPECT_THAT(Infer(op, {{"a", F32({4, 3})}, {"b", F32({7})}}).status.message(),
              HasSubstr("needs as many Out as X (at least one), got 2 X and 1 Out"));
}

// Sequence parallelism's collectives: the gathered extent is nranks times the slice's, an
// extent that does not cut in nranks slices is one line naming it.
TEST(OpsInfer, AllGatherAndReduceScatterCutAlongTheirAxis) {
  Op gather;
  gather.type = "c_all_gather";
  gather.SetInput("X", {"x"}).SetOutput("Out", {"out"});
  gather.SetAttr("group", std::string("mp")).SetAttr("axis", int64_t{1});
  gather.SetAttr("nranks", int64_t{4});
  auto r = Infer(gather, {{"x", F32({2, 3, 5})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 12, 5}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 0);
  EXPECT_DOUBLE_EQ(r.cost.bytes, 4.0 * (30 + 120));

  Op scatter = gather;
  scatter.type = "c_reduce_scatter_sum";
  r = Infer(scatter, {{"x", F32({2, 12, 5})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 3, 5}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 3.0 * 30);  // each output element adds 4 contributions
  EXPECT_TRUE(ops::Registry().Find("c_reduce_scatter_sum")->collective);
  EXPECT_TRUE(ops::Registry().Find("c_all_gather")->collective);

  EXPECT_EQ(Infer(scatter, {{"x", F32({2, 10, 5})}}).status.message(),
            "c_reduce_scatter_sum: X ('x'): extent 10 along axis 1 is not a multiple of the 4 "
            "members of group 'mp'");
  scatter.SetAttr("axis", int64_t{-1});
  r = Infer(scatter, {{"x", F32({2, 3, 8})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 3, 2}));
  scatter.SetAttr("axis", int64_t{3});
  EXPECT_THAT(Infer(scatter, {{"x", F32({2, 3, 8})}}).status.message(),
              HasSubstr("axis 3 is outside its 3 dims"));
  Op bucket = gather;  // each X cut like c_reduce_scatter_sum's, one dtype
  bucket.type = "c_reduce_scatter_coalesced";
  bucket.SetInput("X", {"x", "z"}).SetOutput("Out", {"out", "out2"});
  r = Infer(bucket, {{"x", F32({2, 12, 5})}, {"z", F32({3, 4})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out", 0), F32({2, 3, 5}));
  EXPECT_EQ(r.Out("Out", 1), F32({3, 1}));
  EXPECT_THAT(Infer(bucket, {{"x", F32({2, 12, 5})}, {"z", F32({3, 6})}}).status.message(),
              HasSubstr("X[1] [3, 6] does not cut in 4 slices along axis 1"));
  Op sync = gather;  // the whole tensor in and out, cut in nranks slices along axis
  sync.type = "c_sync_shards";
  r = Infer(sync, {{"x", F32({2, 12, 5})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 12, 5}));
  EXPECT_THAT(Infer(sync, {{"x", F32({2, 10, 5})}}).status.message(),
              HasSubstr("extent 10 along axis 1 is not a multiple of the 4 members"));
  gather.SetAttr("nranks", int64_t{0});
  EXPECT_THAT(Infer(gather, {{"x", F32({2, 3, 8})}}).status.message(),
              HasSubstr("nranks must be at least 1"));
  Op missing;
  missing.type = "c_all_gather";
  missing.SetInput("X", {"x"}).SetOutput("Out", {"out"});
  EXPECT_THAT(Infer(missing, {{"x", F32({2, 3})}}).status.message(), HasSubstr("nranks"));
  EXPECT_THAT(Infer(gather, {{"x", I64({2, 3})}}).status.message(), HasSubstr("X"));

  // c_split: a replicated tensor's slice, shaped as the reduce-scatter's output.
  Op split = scatter;
  split.type = "c_split";
  split.SetAttr("axis", int64_t{0});
  r = Infer(split, {{"x", F32({8, 3})}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.Out("Out"), F32({2, 3}));
  EXPECT_FALSE(ops::Registry().Find("c_split")->collective);
  EXPECT_THAT(Infer(split, {{"x", F32({6, 3})}}).status.message(),
              HasSubstr("extent 6 along axis 0 is not a multiple of the 4 members"));
}

TEST(OpsInfer, MatmulFlops) {
  Op op = Matmul();
  auto r = Infer(op, {{"x", F32({2, 3, 4})}, {"y", F32({4, 5})}});
  ASSERT_TRUE(r.status.ok());
  OpCost cost = r.cost;
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 6 * 5 * 4);
  EXPECT_DOUBLE_EQ(cost.bytes, 4.0 * (24 + 20 + 30));

  Op wg;
  wg.type = "matmul_weight_grad";
  wg.SetInput("X", {"x"}).SetInput("Out@GRAD", {"g"}).SetOutput("Y@GRAD", {"dy"});
  r = Infer(wg, {{"x", F32({2, 3, 4})}, {"g", F32({2, 3, 5})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.Out("Y@GRAD"), F32({4, 5}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 2.0 * 6 * 5 * 4);

  Op attn;
  attn.type = "attention";
  attn.SetInput("QKV", {"qkv"}).SetOutput("Out", {"o"}).SetOutput("Probs", {"p"});
  attn.SetAttr("num_heads", int64_t{2});
  r = Infer(attn, {{"qkv", F32({1, 4, 24})}});
  ASSERT_TRUE(r.status.ok());
  // QK^T and PV: 2 GEMMs of 2·S·S·d per head, plus the softmax.
  EXPECT_DOUBLE_EQ(r.cost.flops, 2 * (2.0 * 2 * 4 * 4 * 4) + 5.0 * 2 * 4 * 4);
}

}  // namespace
}  // namespace pw
