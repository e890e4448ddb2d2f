// Llama builder: the layer's op layout (RMSNorm, q/k/v column-parallel, rotary on q and k,
// grouped-query attention, SwiGLU with gate and up side by side, row-parallel o and down),
// kv heads split over mp or replicated, parameter shards, metadata and config validation.

#include "models/llama.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "ir/verifier.h"
#include "models/model_recipe.h"
#include "ops/registry.h"

namespace pw::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LlamaConfig Tiny() {
  LlamaConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn = 48;
  c.seq = 8;
  c.vocab = 50;
  c.micro_batch_size = 2;
  return c;
}

Module Build(const LlamaConfig& c) {
  StatusOr<Module> m = BuildLlama(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// The ops whose first output starts with `prefix` (one layer's ops).
std::vector<const Op*> OpsOf(const Program& p, const std::string& prefix) {
  std::vector<const Op*> ops;
  for (const Op& op : p.ops())
    if (op.outputs[0].vars[0].rfind(prefix, 0) == 0) ops.push_back(&op);
  return ops;
}

std::vector<std::string> Types(const std::vector<const Op*>& ops) {
  std::vector<std::string> types;
  for (const Op* op : ops) types.push_back(op->type);
  return types;
}

TEST(LlamaTest, BuildsAVerifiedProgramWithMetadata) {
  Module m = Build(Tiny());
  ASSERT_EQ(m.programs().size(), 1u);
  Status verified = VerifyModule(m, ops::Registry());
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  const Program& p = m.main_program();
  EXPECT_EQ(p.FindVar("loss")->shape, Shape{});
  EXPECT_EQ(p.ops().back().role, OpRole::kLoss);
  EXPECT_EQ(m.metadata.GetString("model"), "llama");
  EXPECT_EQ(m.metadata.GetInt("kv_heads"), 2);
  EXPECT_EQ(m.metadata.GetFloat("rope_theta"), 10000.0);
  // No biases, no learned positions; the head is untied from the embedding.
  for (const Var& v : p.vars()) EXPECT_EQ(v.name.find("bias"), std::string::npos) << v.name;
  EXPECT_EQ(p.FindVar("embed")->shape, (Shape{50, 32}));
  EXPECT_EQ(p.FindVar("head.weight")->shape, (Shape{32, 50}));
  EXPECT_EQ(p.ops()[0].type, "embedding");
}

TEST(LlamaTest, LayerHasMegatronLayoutWithSplitKvHeads) {
  LlamaConfig c = Tiny();
  c.mp = 2;
  Module m = Build(c);
  const Program& p = m.main_program();
  std::vector<const Op*> ops = OpsOf(p, "layer1.");
  EXPECT_THAT(Types(ops),
              ElementsAre("rms_norm", "c_identity", "matmul", "matmul", "matmul",
                          "rotary_embedding", "rotary_embedding", "gqa_attention", "matmul",
                          "c_allreduce_sum", "add", "rms_norm", "c_identity", "matmul", "matmul",
                          "swiglu", "matmul", "c_allreduce_sum", "add"));
  for (int i : {2, 3, 4}) EXPECT_EQ(ops[i]->Input("X"), ops[1]->Output("Out"));  // q, k, v
  EXPECT_EQ(ops[5]->Input("X"), ops[2]->Output("Out"));
  EXPECT_EQ(ops[5]->attrs.GetInt("head_dim"), 8);
  EXPECT_EQ(ops[6]->Input("X"), ops[3]->Output("Out"));
  const Op& attn = *ops[7];
  EXPECT_EQ(attn.Input("Q"), ops[5]->Output("Out"));
  EXPECT_EQ(attn.Input("K"), ops[6]->Output("Out"));
  EXPECT_EQ(attn.Input("V"), ops[4]->Output("Out"));
  EXPECT_EQ(attn.attrs.GetInt("num_heads"), 2);            // A / mp
  EXPECT_EQ(attn.attrs.GetInt("kv_heads"), 1);             // G / mp
  EXPECT_EQ(ops[13]->Input("X"), ops[12]->Output("Out"));  // gate and up share the input
  EXPECT_EQ(ops[14]->Input("X"), ops[12]->Output("Out"));
  EXPECT_EQ(ops[15]->Input("Gate"), ops[13]->Output("Out"));
  EXPECT_EQ(ops[15]->Input("Up"), ops[14]->Output("Out"));
  struct Shard {
    std::string name;
    Shape shape, full;
    int axis;
  };
  for (const Shard& e : std::vector<Shard>{{"layer0.q.weight", {32, 16}, {32, 32}, 1},
                                           {"layer0.k.weight", {32, 8}, {32, 16}, 1},
                                           {"layer0.v.weight", {32, 8}, {32, 16}, 1},
                                           {"layer0.o.weight", {16, 32}, {32, 32}, 0},
                                           {"layer0.gate.weight", {32, 24}, {32, 48}, 1},
                                           {"layer0.up.weight", {32, 24}, {32, 48}, 1},
                                           {"layer0.down.weight", {24, 32}, {48, 32}, 0},
                                           {"embed", {25, 32}, {50, 32}, 0},
                                           {"head.weight", {32, 25}, {32, 50}, 1}}) {
    const Var* v = p.FindVar(e.name);
    ASSERT_NE(v, nullptr) << e.name;
    EXPECT_EQ(v->shape, e.shape) << e.name;
    EXPECT_EQ(v->init.full_shape, e.full) << e.name;
    EXPECT_EQ(v->init.shard_axis, e.axis) << e.name;
  }
  EXPECT_EQ(p.FindVar("layer0.attn_norm.scale")->init.num_shards, 1);
}

// One kv head under mp 2: K and V are projected whole on every rank from the norm's output,
// each followed by a c_identity whose gradient sums the ranks' parts.
TEST(LlamaTest, ASingleKvHeadIsReplicated) {
  LlamaConfig c = Tiny();
  c.kv_heads = 1;
  c.mp = 2;
  Module m = Build(c);
  const Program& p = m.main_program();
  EXPECT_TRUE(VerifyModule(m, ops::Registry()).ok());
  std::vector<const Op*> ops = OpsOf(p, "layer0.");
  EXPECT_THAT(Types(ops), ::testing::IsSupersetOf({"c_identity", "gqa_attention"}));
  const Var* k = p.FindVar("layer0.k.weight");
  EXPECT_EQ(k->shape, (Shape{32, 8}));
  EXPECT_EQ(k->init.num_shards, 1);
  for (const Op* op : ops) {
    if (op->type == "matmul" && op->Input("Y") == "layer0.k.weight")
      EXPECT_EQ(op->Input("X"), "layer0.attn_norm.out");
    if (op->type == "gqa_attention") {
      EXPECT_EQ(op->Input("K"), "layer0.k.replicated");
      EXPECT_EQ(op->Input("V"), "layer0.v.replicated");
      EXPECT_EQ(op->attrs.GetInt("kv_heads"), 1);
      EXPECT_EQ(op->attrs.GetInt("num_heads"), 2);
    }
  }
}

TEST(LlamaTest, RecipeBuildsTheSameModuleAgain) {
  LlamaConfig c = Tiny();
  c.layers = 4;
  c.mp = 2;
  c.pp = 2;
  c.vpp = 2;
  c.placement = StagePlacement::kV;
  c.rope_theta = 500000;
  c.seed = 9;
  Module built = Build(c);
  StatusOr<ModelRecipe> recipe = ReadModelRecipe(built);
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  EXPECT_EQ(recipe->model, "llama");
  EXPECT_EQ(recipe->llama.rope_theta, 500000);
  StatusOr<Module> again = BuildFromRecipe(*recipe);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == built);
}

TEST(LlamaTest, PlacesLayersOnStages) {
  LlamaConfig c = Tiny();
  c.layers = 4;
  c.pp = 2;
  c.stage_layers = {1, 3};
  const Module m = Build(c);
  const Program& p = m.main_program();
  for (const Op& op : p.ops()) {
    const std::string& out = op.outputs[0].vars[0];
    if (out.rfind("layer0.", 0) == 0) EXPECT_EQ(op.stage, 0) << out;
    if (out.rfind("layer1.", 0) == 0 || out == "loss") EXPECT_EQ(op.stage, 1) << out;
  }
}

TEST(LlamaTest, BadConfigsNameTheirSetting) {
  struct Bad {
    std::function<void(LlamaConfig&)> set;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {[](LlamaConfig& c) { c.kv_heads = 3; }, "kv-heads 3 does not divide heads 4"},
      {[](LlamaConfig& c) {
         c.heads = 8;
         c.kv_heads = 2;
         c.mp = 4;
       },
       "kv-heads 2 is fewer than mp 4"},
      {[](LlamaConfig& c) {
         c.hidden = 36;
         c.heads = 4;
       },
       "head size 9 (hidden 36 / heads 4) is odd"},
      {[](LlamaConfig& c) { c.mp = 3; }, "heads 4 is not divisible by mp 3"},
      {[](LlamaConfig& c) {
         c.heads = 8;
         c.kv_heads = 4;
         c.hidden = 64;
         c.mp = 8;
       },
       "kv-heads 4 is fewer than mp 8"},
      {[](LlamaConfig& c) {
         c.ffn = 45;
         c.mp = 2;
       },
       "ffn 45 is not divisible by mp 2"},
      {[](LlamaConfig& c) { c.rope_theta = 1; }, "rope-theta must be > 1"},
      {[](LlamaConfig& c) { c.pp = 3; }, "layers 2 is not divisible by pp*vpp"},
  };
  for (const Bad& b : bad) {
    LlamaConfig c = Tiny();
    b.set(c);
    StatusOr<Module> m = BuildLlama(c);
    ASSERT_FALSE(m.ok()) << b.message;
    EXPECT_THAT(m.status().message(), HasSubstr(b.message));
    EXPECT_EQ(m.status().message().rfind("llama: ", 0), 0u) << m.status().message();
  }
}

}  // namespace
}  // namespace pw::models
