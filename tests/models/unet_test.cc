// U-Net builder: the layer stack, skip connections across non-adjacent stages, placement.

#include "models/unet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/verifier.h"
#include "models/model_config.h"
#include "ops/registry.h"

namespace pw::models {
namespace {

using ::testing::HasSubstr;

UnetConfig Small() {
  UnetConfig c;
  c.layers = 8;
  c.hidden = 16;
  c.micro_batch_size = 2;
  c.seq = 4;
  c.vocab = 32;
  c.pp = 4;
  return c;
}

const Op* Producer(const Program& p, const std::string& var) {
  for (const Op& op : p.ops())
    if (op.Output("Out") == var) return &op;
  return nullptr;
}

TEST(UnetTest, BuildsAVerifiedProgram) {
  StatusOr<Module> m = BuildUnet(Small());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(VerifyModule(*m, ops::Registry()).ok());
  EXPECT_EQ(m->mesh, (Mesh{.dp = 1, .pp = 4, .mp = 1, .vpp = 1}));
  const Program& p = m->main_program();
  EXPECT_EQ(p.ops().front().type, "embedding");
  EXPECT_EQ(p.ops().back().type, "mean");
  EXPECT_EQ(p.ops().back().role, OpRole::kLoss);
  EXPECT_EQ(p.FindVar("layer3.weight")->shape, (Shape{16, 16}));
  EXPECT_EQ(p.FindVar("loss")->shape, Shape{});
  EXPECT_DOUBLE_EQ(p.FindVar("layer3.weight")->init.std, 0.25);  // 1 / sqrt(H)
  EXPECT_EQ(p.FindVar("layer3.bias")->init.kind, Initializer::Kind::kZeros);
  EXPECT_EQ(m->metadata.GetString(kMetaModel), "unet");
  EXPECT_EQ(m->metadata.GetString(kMetaLoss), "loss");
  EXPECT_EQ(m->metadata.GetInt("vocab"), 32);
}

TEST(UnetTest, SkipConnectionsJoinLayerIToLayerLMinus1MinusI) {
  StatusOr<Module> m = BuildUnet(Small());
  ASSERT_TRUE(m.ok());
  const Program& p = m->main_program();
  // Layers 7, 6, 5 get the outputs of layers 0, 1, 2; layer 4 directly follows layer 3.
  for (int i : {0, 1, 2}) {
    const Op* add = Producer(p, "layer" + std::to_string(7 - i) + ".skip");
    ASSERT_NE(add, nullptr) << i;
    EXPECT_EQ(add->type, "add");
    EXPECT_EQ(add->Input("Y"), "layer" + std::to_string(i) + ".out");
    EXPECT_EQ(add->Input("X"), "layer" + std::to_string(6 - i) + ".out");
  }
  EXPECT_EQ(Producer(p, "layer4.skip"), nullptr);
  EXPECT_EQ(Producer(p, "layer4.matmul")->Input("X"), "layer3.out");
  // Layer 0 (stage 0) feeds layer 7 (stage 3): the value crosses non-adjacent stages.
  EXPECT_EQ(Producer(p, "layer0.out")->stage, 0);
  EXPECT_EQ(Producer(p, "layer7.skip")->stage, 3);
}

TEST(UnetTest, LayersSplitEvenlyOverStages) {
  StatusOr<Module> m = BuildUnet(Small());
  ASSERT_TRUE(m.ok());
  const Program& p = m->main_program();
  for (int layer = 0; layer < 8; ++layer)
    EXPECT_EQ(Producer(p, "layer" + std::to_string(layer) + ".out")->stage, layer / 2);
  EXPECT_EQ(p.ops().front().stage, 0);
  EXPECT_EQ(p.ops().back().stage, 3);
  for (const Op& op : p.ops()) EXPECT_EQ(op.chunk, 0);
}

TEST(UnetTest, RejectsBadConfigs) {
  UnetConfig c = Small();
  c.layers = 6;
  StatusOr<Module> m = BuildUnet(c);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("layers 6 is not divisible by pp 4"));
  c = Small();
  c.hidden = 0;
  m = BuildUnet(c);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("hidden must be > 0"));
}

}  // namespace
}  // namespace pw::models
