// A module's recorded recipe builds the same module again: every GPT and U-Net config field
// is read back, and a module without a builder's metadata is refused by name.

#include "models/model_recipe.h"

#include <gtest/gtest.h>

namespace pw::models {
namespace {

TEST(ModelRecipe, GptBuildsTheSameModuleAgain) {
  GptConfig c;
  c.layers = 4;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 192;
  c.seq = 16;
  c.vocab = 128;
  c.micro_batch_size = 2;
  c.mp = 2;
  c.pp = 2;
  c.vpp = 2;
  c.placement = StagePlacement::kV;
  c.vocab_parallel = false;
  c.bias_fusion = true;
  c.seed = 7;
  StatusOr<Module> built = BuildGpt(c);
  ASSERT_TRUE(built.ok()) << built.status().message();
  StatusOr<ModelRecipe> recipe = ReadModelRecipe(*built);
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  EXPECT_EQ(recipe->model, "gpt");
  EXPECT_EQ(recipe->micro_batch_size(), 2);
  EXPECT_EQ(recipe->gpt.placement, StagePlacement::kV);
  EXPECT_FALSE(recipe->gpt.vocab_parallel);
  EXPECT_TRUE(recipe->gpt.bias_fusion);
  StatusOr<Module> again = BuildFromRecipe(*recipe);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == *built);
}

TEST(ModelRecipe, UnetBuildsTheSameModuleAgain) {
  UnetConfig c;
  c.layers = 8;
  c.hidden = 32;
  c.micro_batch_size = 3;
  c.seq = 8;
  c.vocab = 64;
  c.pp = 4;
  c.seed = 5;
  StatusOr<Module> built = BuildUnet(c);
  ASSERT_TRUE(built.ok()) << built.status().message();
  StatusOr<ModelRecipe> recipe = ReadModelRecipe(*built);
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  EXPECT_EQ(recipe->model, "unet");
  StatusOr<Module> again = BuildFromRecipe(*recipe);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == *built);
}

TEST(ModelRecipe, RefusesAModuleWithoutOne) {
  Module hand_written;
  hand_written.name = "mine";
  StatusOr<ModelRecipe> recipe = ReadModelRecipe(hand_written);
  ASSERT_FALSE(recipe.ok());
  EXPECT_NE(recipe.status().message().find("records no model"), std::string::npos);
  StatusOr<Module> gpt = BuildGpt(GptConfig{});
  ASSERT_TRUE(gpt.ok());
  gpt->metadata.Erase("heads");
  recipe = ReadModelRecipe(*gpt);
  ASSERT_FALSE(recipe.ok());
  EXPECT_NE(recipe.status().message().find("without its 'heads'"), std::string::npos)
      << recipe.status().message();
}

}  // namespace
}  // namespace pw::models
