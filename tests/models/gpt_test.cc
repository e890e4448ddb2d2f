// GPT builder: Megatron op layout, parameter shapes and sharding, pipeline placement,
// metadata and config validation.

#include "models/gpt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "ir/verifier.h"
#include "models/model_config.h"
#include "ops/registry.h"

namespace pw::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GptConfig Tiny() {
  GptConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn = 64;
  c.seq = 8;
  c.vocab = 50;
  c.micro_batch_size = 2;
  return c;
}

Module Build(const GptConfig& c) {
  StatusOr<Module> m = BuildGpt(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

std::vector<std::string> OpTypes(const Program& p) {
  std::vector<std::string> types;
  for (const Op& op : p.ops()) types.push_back(op.type);
  return types;
}

// The ops whose outputs start with `prefix` (one layer's ops).
std::vector<const Op*> OpsOf(const Program& p, const std::string& prefix) {
  std::vector<const Op*> ops;
  for (const Op& op : p.ops())
    if (op.outputs[0].vars[0].rfind(prefix, 0) == 0) ops.push_back(&op);
  return ops;
}

TEST(GptTest, BuildsAVerifiedForwardAndLossProgram) {
  Module m = Build(Tiny());
  ASSERT_EQ(m.programs().size(), 1u);
  EXPECT_TRUE(VerifyModule(m, ops::Registry()).ok());
  EXPECT_EQ(m.mesh, (Mesh{.dp = 1, .pp = 1, .mp = 1, .vpp = 1}));
  const Program& p = m.main_program();
  EXPECT_EQ(p.FindVar("tokens")->shape, (Shape{2, 8}));
  EXPECT_EQ(p.FindVar("tokens")->dtype, DataType::kInt64);
  EXPECT_EQ(p.FindVar("labels")->shape, (Shape{2, 8}));
  EXPECT_EQ(p.FindVar("loss")->shape, Shape{});
  EXPECT_EQ(p.ops().back().type, "mean");
  EXPECT_EQ(p.ops().back().role, OpRole::kLoss);
  for (const Op& op : p.ops())
    if (&op != &p.ops().back()) EXPECT_EQ(op.role, OpRole::kForward) << op.type;
}

TEST(GptTest, LayerHasMegatronLayout) {
  GptConfig c = Tiny();
  c.mp = 2;
  Module m = Build(c);
  const Program& p = m.main_program();
  std::vector<std::string> layer;
  for (const Op* op : OpsOf(p, "layer1.")) layer.push_back(op->type);
  EXPECT_THAT(
      layer, ElementsAre("layer_norm", "c_identity", "matmul", "bias_add", "attention", "matmul",
                         "c_allreduce_sum", "bias_add", "add", "layer_norm", "c_identity", "matmul",
                         "bias_add", "gelu", "matmul", "c_allreduce_sum", "bias_add", "add"));
  std::vector<const Op*> ops = OpsOf(p, "layer1.");
  EXPECT_EQ(ops[2]->Input("X"), ops[1]->Output("Out"));  // QKV reads the c_identity output
  EXPECT_EQ(ops[2]->Input("Y"), "layer1.qkv.weight");
  EXPECT_EQ(ops[4]->attrs.GetInt("num_heads"), 2);  // A / mp
  EXPECT_TRUE(ops[4]->attrs.GetBool("causal"));
  EXPECT_EQ(ops[7]->Input("X"), ops[6]->Output("Out"));  // bias after the all-reduce
  EXPECT_EQ(ops[7]->Input("Bias"), "layer1.proj.bias");
  EXPECT_EQ(ops[8]->Input("X"), "layer0.residual2");  // residual from the previous layer
  EXPECT_EQ(ops[11]->Input("Y"), "layer1.fc1.weight");
  EXPECT_EQ(ops[14]->Input("Y"), "layer1.fc2.weight");
}

// Megatron's fused epilogues: the same parameters; fc1's bias with the gelu, the projection's
// and fc2's bias with their dropout and residual add.
TEST(GptTest, BiasFusionBuildsMegatronsFusedEpilogues) {
  GptConfig c = Tiny();
  c.mp = 2;
  c.unfused_attention = true;
  c.dropout = 0.1;
  Module plain = Build(c);
  c.bias_fusion = true;
  Module m = Build(c);
  EXPECT_TRUE(VerifyModule(m, ops::Registry()).ok());
  const Program& p = m.main_program();
  std::vector<std::string> layer;
  for (const Op* op : OpsOf(p, "layer1.")) layer.push_back(op->type);
  EXPECT_THAT(std::vector<std::string>(layer.end() - 9, layer.end()),
              ElementsAre("c_allreduce_sum", "bias_dropout_add", "layer_norm", "c_identity",
                          "matmul", "bias_gelu", "matmul", "c_allreduce_sum", "bias_dropout_add"));
  const Op* fc2 = OpsOf(p, "layer1.residual2")[0];
  EXPECT_EQ(fc2->type, "bias_dropout_add");
  EXPECT_EQ(fc2->Input("Bias"), "layer1.fc2.bias");
  EXPECT_EQ(fc2->Input("Residual"), "layer1.residual1");
  EXPECT_EQ(fc2->Input("Seed"), "dropout_seed");
  EXPECT_DOUBLE_EQ(fc2->attrs.GetFloat("p"), 0.1);
  std::set<std::string> params, plain_params;
  for (const Var& v : p.vars())
    if (v.is_parameter) params.insert(v.name + ShapeToString(v.shape));
  for (const Var& v : plain.main_program().vars())
    if (v.is_parameter) plain_params.insert(v.name + ShapeToString(v.shape));
  EXPECT_EQ(params, plain_params);
  EXPECT_TRUE(m.metadata.GetBool("bias_fusion"));
  EXPECT_FALSE(plain.metadata.Has("bias_fusion"));
  EXPECT_LT(p.ops().size(), plain.main_program().ops().size());
  // Without dropout the epilogue still adds the bias and the residual, with no seed input.
  c.dropout = 0;
  Module no_dropout = Build(c);
  EXPECT_EQ(no_dropout.main_program().FindVar("dropout_seed"), nullptr);
  EXPECT_TRUE(OpsOf(no_dropout.main_program(), "layer1.residual2")[0]->Input("Seed").empty());
}

TEST(GptTest, EmbeddingAndHead) {
  Module m = Build(Tiny());
  const Program& p = m.main_program();
  EXPECT_THAT(OpTypes(p), ::testing::IsSupersetOf({"embedding", "softmax_cross_entropy"}));
  const Op& emb = p.ops()[0];
  EXPECT_EQ(emb.type, "embedding");
  EXPECT_EQ(emb.Input("Ids"), "tokens");
  EXPECT_EQ(emb.Input("W"), "wte");
  EXPECT_EQ(p.ops()[1].type, "bias_add");
  EXPECT_EQ(p.ops()[1].Input("Bias"), "wpe");
  EXPECT_EQ(p.FindVar("wte")->shape, (Shape{50, 32}));
  EXPECT_EQ(p.FindVar("wpe")->shape, (Shape{8, 32}));
  EXPECT_EQ(p.FindVar("head.weight")->shape, (Shape{32, 50}));  // untied, replicated
  EXPECT_EQ(p.FindVar("logits")->shape, (Shape{2, 8, 50}));
}

TEST(GptTest, ShardedParametersAreColumnOrRowSlices) {
  GptConfig c = Tiny();
  c.mp = 2;
  Module m = Build(c);
  EXPECT_EQ(m.mesh.mp, 2);
  const Program& p = m.main_program();
  struct Expect {
    std::string name;
    Shape shape, full;
    int axis;
  };
  for (const Expect& e : std::vector<Expect>{
           {"layer0.qkv.weight", {32, 48}, {32, 96}, 1},
           {"layer0.qkv.bias", {48}, {96}, 0},
           {"layer0.proj.weight", {16, 32}, {32, 32}, 0},
           {"layer0.fc1.weight", {32, 32}, {32, 64}, 1},
           {"layer0.fc1.bias", {32}, {64}, 0},
           {"layer0.fc2.weight", {32, 32}, {64, 32}, 0},
           {"wte", {25, 32}, {50, 32}, 0},          // vocabulary rows
           {"head.weight", {32, 25}, {32, 50}, 1},  // vocabulary columns
       }) {
    const Var* v = p.FindVar(e.name);
    ASSERT_NE(v, nullptr) << e.name;
    EXPECT_TRUE(v->is_parameter && v->persistable) << e.name;
    EXPECT_EQ(v->shape, e.shape) << e.name;
    EXPECT_EQ(v->init.full_shape, e.full) << e.name;
    EXPECT_EQ(v->init.shard_axis, e.axis) << e.name;
    EXPECT_EQ(v->init.shard_index, 0) << e.name;
    EXPECT_EQ(v->init.num_shards, 2) << e.name;
  }
  for (const char* replicated :
       {"layer0.proj.bias", "layer0.fc2.bias", "layer0.ln1.scale", "wpe"}) {
    const Var* v = p.FindVar(replicated);
    ASSERT_NE(v, nullptr) << replicated;
    EXPECT_TRUE(v->init.full_shape.empty()) << replicated;
    EXPECT_EQ(v->init.num_shards, 1) << replicated;
  }
}

// Megatron's vocabulary parallelism: a masked lookup completed by an all-reduce, and the
// parallel cross-entropy over the head's column shards (max and sums all-reduced).
TEST(GptTest, VocabParallelEmbeddingAndCrossEntropy) {
  GptConfig c = Tiny();
  c.mp = 2;
  Module m = Build(c);
  const Program& p = m.main_program();
  EXPECT_EQ(p.ops()[0].type, "c_embedding");
  EXPECT_EQ(p.ops()[0].attrs.GetInt("vocab_size"), 50);
  EXPECT_EQ(p.ops()[1].type, "c_allreduce_sum");
  EXPECT_EQ(p.ops()[1].Input("X"), p.ops()[0].Output("Out"));
  std::vector<std::string> head;
  bool after_ln_f = false;
  for (const Op& op : p.ops()) {
    if (after_ln_f) head.push_back(op.type);
    after_ln_f = after_ln_f || op.Output("Y") == "ln_f.out";
  }
  EXPECT_THAT(
      head, ElementsAre("c_identity", "matmul", "reduce_max", "c_allreduce_max", "c_softmax_stats",
                        "c_allreduce_sum", "c_allreduce_sum", "c_softmax_cross_entropy", "mean"));
  EXPECT_EQ(p.FindVar("logits")->shape, (Shape{2, 8, 25}));
  EXPECT_TRUE(m.metadata.GetBool("vocab_parallel"));
  // Off: the table and the head whole on every rank, as at mp = 1.
  c.vocab_parallel = false;
  Module whole = Build(c);
  EXPECT_EQ(whole.main_program().ops()[0].type, "embedding");
  EXPECT_EQ(whole.main_program().FindVar("wte")->shape, (Shape{50, 32}));
  EXPECT_EQ(whole.main_program().FindVar("head.weight")->shape, (Shape{32, 50}));
  EXPECT_FALSE(whole.metadata.GetBool("vocab_parallel"));
}

TEST(GptTest, InitializersFollowMegatronDefaults) {
  GptConfig c = Tiny();
  c.seed = 42;
  Module m = Build(c);
  const Program& p = m.main_program();
  const Var* w = p.FindVar("layer1.qkv.weight");
  EXPECT_EQ(w->init.kind, Initializer::Kind::kNormal);
  EXPECT_DOUBLE_EQ(w->init.std, 0.02);
  EXPECT_EQ(w->init.seed, 42u);
  EXPECT_EQ(w->init.key, "layer1.qkv.weight");
  EXPECT_EQ(p.FindVar("layer1.qkv.bias")->init.kind, Initializer::Kind::kZeros);
  EXPECT_EQ(p.FindVar("layer1.ln2.scale")->init.kind, Initializer::Kind::kConstant);
  EXPECT_DOUBLE_EQ(p.FindVar("layer1.ln2.scale")->init.value, 1.0);
  EXPECT_EQ(p.FindVar("ln_f.bias")->init.kind, Initializer::Kind::kZeros);
}

std::set<std::string> ParameterKeys(const Module& m) {
  std::set<std::string> keys;
  for (const Var& v : m.main_program().vars())
    if (v.is_parameter) keys.insert(v.init.key);
  return keys;
}

TEST(GptTest, ParameterKeysAreTheSameInEveryLayout) {
  GptConfig c = Tiny();
  c.layers = 4;
  std::set<std::string> base = ParameterKeys(Build(c));
  EXPECT_EQ(base.size(), 3u + 4 * 12 + 2);
  c.mp = 2;
  c.pp = 2;
  c.vpp = 2;
  EXPECT_EQ(ParameterKeys(Build(c)), base);
}

TEST(GptTest, InterleavedPipelinePlacement) {
  GptConfig c = Tiny();
  c.layers = 8;
  c.pp = 2;
  c.vpp = 2;  // 4 model chunks of 2 layers: chunk k -> stage k % 2, virtual chunk k / 2
  Module m = Build(c);
  EXPECT_EQ(m.mesh, (Mesh{.dp = 1, .pp = 2, .mp = 1, .vpp = 2}));
  const Program& p = m.main_program();
  for (int layer = 0; layer < 8; ++layer) {
    int model_chunk = layer / 2;
    for (const Op* op : OpsOf(p, "layer" + std::to_string(layer) + ".")) {
      EXPECT_EQ(op->stage, model_chunk % 2) << "layer " << layer << " " << op->type;
      EXPECT_EQ(op->chunk, model_chunk / 2) << "layer " << layer << " " << op->type;
    }
  }
  EXPECT_EQ(p.ops()[0].stage, 0);  // embedding
  EXPECT_EQ(p.ops()[0].chunk, 0);
  EXPECT_EQ(p.ops().back().stage, 1);  // loss on the last model chunk
  EXPECT_EQ(p.ops().back().chunk, 1);
  EXPECT_EQ(p.FindVar("wte")->stage, 0);
  EXPECT_EQ(p.FindVar("head.weight")->stage, 1);
  EXPECT_EQ(p.FindVar("labels")->stage, 1);
  for (const Op& op : p.ops()) EXPECT_GE(op.stage, 0) << op.type;
}

TEST(GptTest, RecordsConfigInMetadata) {
  GptConfig c = Tiny();
  c.mp = 2;
  c.seed = 9;
  Module m = Build(c);
  EXPECT_EQ(m.metadata.GetString(kMetaModel), "gpt");
  EXPECT_EQ(m.metadata.GetString(kMetaLoss), "loss");
  const Attribute* inputs = m.metadata.Find(kMetaInputs);
  ASSERT_NE(inputs, nullptr);
  EXPECT_THAT(std::get<std::vector<std::string>>(*inputs), ElementsAre("tokens", "labels"));
  EXPECT_EQ(m.metadata.GetInt("layers"), 2);
  EXPECT_EQ(m.metadata.GetInt("hidden"), 32);
  EXPECT_EQ(m.metadata.GetInt("heads"), 4);
  EXPECT_EQ(m.metadata.GetInt("ffn"), 64);
  EXPECT_EQ(m.metadata.GetInt("seq"), 8);
  EXPECT_EQ(m.metadata.GetInt("vocab"), 50);
  EXPECT_EQ(m.metadata.GetInt("micro_batch_size"), 2);
  EXPECT_EQ(m.metadata.GetInt("mp"), 2);
  EXPECT_EQ(m.metadata.GetInt("pp"), 1);
  EXPECT_EQ(m.metadata.GetInt("vpp"), 1);
  EXPECT_EQ(m.metadata.GetInt("seed"), 9);
}

TEST(GptTest, RejectsBadConfigsWithOneLine) {
  struct Case {
    void (*edit)(GptConfig&);
    const char* message;
  };
  for (const Case& k : std::vector<Case>{
           {[](GptConfig& c) { c.hidden = 30; }, "hidden 30 is not divisible by heads 4"},
           {[](GptConfig& c) { c.mp = 3; }, "heads 4 is not divisible by mp 3"},
           {[](GptConfig& c) { c.ffn = 66, c.mp = 4; }, "ffn 66 is not divisible by mp 4"},
           {[](GptConfig& c) { c.layers = 3, c.pp = 2; }, "layers 3 is not divisible by pp*vpp"},
           {[](GptConfig& c) { c.pp = 1, c.vpp = 4; }, "layers 2 is not divisible by pp*vpp"},
           {[](GptConfig& c) { c.layers = 0; }, "layers must be > 0"},
           {[](GptConfig& c) { c.vocab = -1; }, "vocab must be > 0"},
           {[](GptConfig& c) { c.micro_batch_size = 0; }, "micro-batch-size must be > 0"},
           {[](GptConfig& c) { c.mp = 0; }, "mp must be > 0"},
           {[](GptConfig& c) { c.vocab = 51, c.mp = 2; }, "vocab 51 is not divisible by mp 2"},
       }) {
    GptConfig c = Tiny();
    k.edit(c);
    StatusOr<Module> m = BuildGpt(c);
    ASSERT_FALSE(m.ok()) << k.message;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(m.status().message(), HasSubstr(k.message));
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace pw::models
