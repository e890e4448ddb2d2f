// The shapes `pipeweave tune` builds a recorded model with: every vpp that splits a rank's
// layers evenly, V only at vpp 2, every micro-batch size that leaves at least pp
// micro-batches of the global batch, never the shape as built; and build-model arguments
// that name every field.

#include "search/tune_shapes.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "passes/cost_inputs.h"

namespace pw::search {
namespace {

models::ModelRecipe Gpt(int64_t layers, int pp) {
  models::ModelRecipe r;
  r.model = "gpt";
  r.gpt.layers = layers;
  r.gpt.pp = pp;
  r.gpt.mp = 2;
  return r;
}

TEST(TuneShapes, StagingsAndMicroBatchSizesThatFit) {
  // 12 layers on 2 ranks: 6 per rank, so vpp 1, 2, 3, 6 (and V at 2); a global batch of
  // 8 gives micro-batch sizes 1, 2, 4 (8, 4, 2 micro-batches >= pp). Each shape's
  // build-model arguments, written out here rather than by BuildModelArgs.
  std::map<std::string, std::string> got;
  for (const ShapeChoice& c : ShapeChoices(Gpt(12, 2), 8, 1)) {
    EXPECT_EQ(c.micro_batches * c.recipe.micro_batch_size(), 8) << c.label;
    EXPECT_TRUE(got.emplace(c.label, c.build_model).second) << c.label;
  }
  std::map<std::string, std::string> expected;
  for (const auto& [staging, vpp, placement] :
       std::vector<std::tuple<std::string, int, std::string>>{{"vpp 1", 1, "loop"},
                                                              {"vpp 2", 2, "loop"},
                                                              {"vpp 2 v", 2, "v"},
                                                              {"vpp 3", 3, "loop"},
                                                              {"vpp 6", 6, "loop"}})
    for (int mbs : {1, 2, 4})
      expected[StrCat(staging, ", micro-batch size ", mbs)] =
          StrCat("gpt --layers 12 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 ",
                 "--micro-batch-size ", mbs, " --mp 2 --pp 2 --vpp ", vpp, " --placement ",
                 placement, " --vocab-parallel on --seed 1");
  expected.erase("vpp 1, micro-batch size 1");  // as built
  std::set<std::string> got_labels, expected_labels;
  for (const auto& [label, args] : got) got_labels.insert(label);
  for (const auto& [label, args] : expected) expected_labels.insert(label);
  EXPECT_EQ(got_labels, expected_labels);
  for (const auto& [label, args] : expected)
    if (got.count(label)) EXPECT_EQ(got.at(label), args) << label;
}

TEST(TuneShapes, DataParallelReplicasShareTheGlobalBatch) {
  // 16 samples over 2 replicas: 8 each; pp 4 leaves micro-batch sizes 1 and 2, and one
  // layer per rank only vpp 1: the one other shape is micro-batch size 2.
  std::vector<ShapeChoice> choices = ShapeChoices(Gpt(4, 4), 16, 2);
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].recipe.micro_batch_size(), 2);
  EXPECT_EQ(choices[0].micro_batches, 4);
}

TEST(TuneShapes, BuildModelArgumentsNameEveryField) {
  models::ModelRecipe r = Gpt(8, 2);
  r.gpt.vpp = 2;
  r.gpt.placement = StagePlacement::kV;
  r.gpt.vocab_parallel = false;
  EXPECT_EQ(BuildModelArgs(r),
            "gpt --layers 8 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 "
            "--micro-batch-size 1 --mp 2 --pp 2 --vpp 2 --placement v --vocab-parallel off "
            "--seed 1");
}

// A Llama is staged like the GPT, and its arguments name its own fields too.
TEST(TuneShapes, LlamaStagingsAndArguments) {
  models::ModelRecipe r;
  r.model = "llama";
  r.llama.layers = 8;
  r.llama.pp = 2;
  r.llama.mp = 2;
  r.llama.rope_theta = 500000;
  std::set<std::string> labels;
  for (const ShapeChoice& c : ShapeChoices(r, 4, 1)) {
    labels.insert(c.label);
    EXPECT_EQ(c.build_model.rfind("llama --layers 8 --hidden 64 --heads 4 --kv-heads 2 ", 0), 0u)
        << c.build_model;
  }
  EXPECT_EQ(labels,
            (std::set<std::string>{"vpp 1, micro-batch size 2", "vpp 2, micro-batch size 1",
                                   "vpp 2, micro-batch size 2", "vpp 2 v, micro-batch size 1",
                                   "vpp 2 v, micro-batch size 2", "vpp 4, micro-batch size 1",
                                   "vpp 4, micro-batch size 2"}));
  EXPECT_EQ(BuildModelArgs(r),
            "llama --layers 8 --hidden 64 --heads 4 --kv-heads 2 --ffn 172 --seq 16 --vocab 128 "
            "--rope-theta 500000 --micro-batch-size 1 --mp 2 --pp 2 --vpp 1 --placement loop "
            "--vocab-parallel on --seed 1");
}

// The shapes built and ranked by the action-level simulator: every shape that builds, each
// at its own best kind's makespan, fastest first, over the module's dp replicas.
TEST(RankShapes, EveryShapeBuiltAndRankedFastestFirst) {
  const models::ModelRecipe recipe = Gpt(4, 2);
  StatusOr<Module> built = models::BuildFromRecipe(recipe);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok());
  StatusOr<ShapeRanking> ranking = RankShapes(recipe, *built, 8, *estimator, 8);
  ASSERT_TRUE(ranking.ok()) << ranking.status().ToString();
  EXPECT_FALSE(ranking->as_built.kind.empty());
  // 2 layers per rank: vpp 1, 2, 2 v; micro-batch sizes 1, 2, 4; less the shape as built.
  EXPECT_EQ(ranking->shapes.size(), ShapeChoices(recipe, 8, 1).size());
  EXPECT_EQ(ranking->shapes.size(), 8u);
  for (size_t i = 0; i < ranking->shapes.size(); ++i) {
    const RankedShape& shape = ranking->shapes[i];
    if (i > 0) EXPECT_LE(ranking->shapes[i - 1].best.makespan_ms, shape.best.makespan_ms);
    EXPECT_EQ(shape.module.mesh.dp, built->mesh.dp);
    StatusOr<ActionLevelBest> alone =
        BestActionLevelKind(shape.module, *estimator, shape.choice.micro_batches);
    ASSERT_TRUE(alone.ok()) << shape.choice.label;
    EXPECT_EQ(alone->makespan_ms, shape.best.makespan_ms) << shape.choice.label;
  }
}

TEST(TuneShapes, MeshSplitsOfTheRanks) {
  // 8 ranks of a 4-layer GPT with 4 heads (mp 2 x pp 2 x dp 2 as built), global batch 16,
  // micro-batch size 1: every dp x pp x mp of 8 but the built one, pp dividing the 4 layers,
  // mp the 4 heads (so not mp 8), and at least pp micro-batches per replica.
  models::ModelRecipe built = Gpt(4, 2);
  built.gpt.dp = 2;
  std::map<std::string, int> got;  // label -> micro-batches per replica
  for (const ShapeChoice& c : MeshSplits(built, 16)) {
    const models::GptConfig& g = c.recipe.gpt;
    EXPECT_EQ(g.dp * g.pp * g.mp, 8) << c.label;
    EXPECT_EQ(g.vpp, 1);
    EXPECT_EQ(c.label, StrCat("dp ", g.dp, " x pp ", g.pp, " x mp ", g.mp));
    EXPECT_NE(c.build_model.find(StrCat(" --mp ", g.mp, " --pp ", g.pp)), std::string::npos);
    EXPECT_EQ(c.build_model.find(" --dp ") != std::string::npos, g.dp > 1) << c.build_model;
    got[c.label] = c.micro_batches;
  }
  const std::map<std::string, int> expected = {
      {"dp 1 x pp 2 x mp 4", 16}, {"dp 1 x pp 4 x mp 2", 16}, {"dp 2 x pp 1 x mp 4", 8},
      {"dp 2 x pp 4 x mp 1", 8},  {"dp 4 x pp 1 x mp 2", 4},  {"dp 4 x pp 2 x mp 1", 4},
      {"dp 8 x pp 1 x mp 1", 2}};
  EXPECT_EQ(got, expected);
  // At 4 samples dp 8 cannot share the batch, dp 4 has 1 micro-batch (pp 1 only) and dp 2
  // has 2 (not pp 4).
  std::set<std::string> small;
  for (const ShapeChoice& c : MeshSplits(built, 4)) small.insert(c.label);
  EXPECT_EQ(small, (std::set<std::string>{"dp 1 x pp 2 x mp 4", "dp 1 x pp 4 x mp 2",
                                          "dp 2 x pp 1 x mp 4", "dp 4 x pp 1 x mp 2"}));
}

}  // namespace
}  // namespace pw::search
