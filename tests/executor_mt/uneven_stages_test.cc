// Uneven stages (build-model --stage-layers) only change where layers run: every schedule
// kind trains the same bits as one rank (mp = 1 keeps every reduction's order), ranks as
// threads. Model: the small GPT with 8 layers; 8 micro-batches per step; 3 steps.

#include <gtest/gtest.h>

#include "equivalence_util.h"
#include "models/gpt.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 3;
constexpr int kMicroBatches = 8;
constexpr uint64_t kSeed = 1;

models::GptConfig EightLayers(int pp, int vpp, std::vector<int64_t> stage_layers,
                              models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  models::GptConfig c = SmallGptConfig(1, pp, vpp, placement);
  c.layers = 8;
  c.stage_layers = std::move(stage_layers);
  return c;
}

Module Build(const models::GptConfig& c, const std::string& pipeline) {
  auto built = models::BuildGpt(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return Module{};
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

const ThreadRun& OneRank() {
  static const ThreadRun run = [] {
    auto r =
        RunAsThreads(Build(EightLayers(1, 1, {}), "append-backward"), kSteps, kMicroBatches, kSeed);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ThreadRun{};
  }();
  return run;
}

struct UnevenCase {
  const char* kind;
  int pp, vpp;
  std::vector<int64_t> stage_layers;
  bool split_backward = false;
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
};

void PrintTo(const UnevenCase& c, std::ostream* out) {
  *out << c.kind << " pp=" << c.pp << " vpp=" << c.vpp << " layers=";
  for (int64_t n : c.stage_layers) *out << n << ",";
}

class UnevenStagesTest : public ::testing::TestWithParam<UnevenCase> {};

TEST_P(UnevenStagesTest, TrainsTheBitsOfOneRank) {
  const UnevenCase& c = GetParam();
  const models::GptConfig config = EightLayers(c.pp, c.vpp, c.stage_layers, c.placement);
  const std::string pipeline =
      StrCat("append-backward,split-program", c.split_backward ? "{split-backward=true}" : "",
             ",schedule{kind=", c.kind, ",micro-batches=", kMicroBatches, "},insert-p2p");
  Module m = Build(config, pipeline);
  ASSERT_FALSE(m.plan.empty());
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const ThreadRun& base = OneRank();
  ASSERT_EQ(run->losses.size(), base.losses.size());
  for (size_t s = 0; s < base.losses.size(); ++s)
    EXPECT_EQ(run->losses[s], base.losses[s]) << "step " << s;
  std::map<std::string, Tensor> got = FullParams(m, *run);
  std::map<std::string, Tensor> want =
      FullParams(Build(EightLayers(1, 1, {}), "append-backward"), base);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(SameBits(got.at(name), t)) << name;
  }
}

constexpr auto kV = models::ChunkPlacement::kV;

INSTANTIATE_TEST_SUITE_P(Schedules, UnevenStagesTest,
                         ::testing::Values(UnevenCase{"1f1b", 4, 1, {1, 3, 3, 1}},
                                           UnevenCase{"fthenb", 2, 1, {3, 5}},
                                           UnevenCase{"interleaved-1f1b", 2, 2, {1, 3, 3, 1}},
                                           UnevenCase{"zb-h1", 4, 1, {1, 3, 3, 1}, true},
                                           UnevenCase{"zb-v", 2, 2, {1, 3, 3, 1}, true, kV}));

// Where the layers went: the layer-norm scale of layer i lives on the stage that runs it.
TEST(UnevenStagesTest, LayersLandOnTheStagesTheListNames) {
  auto m = models::BuildGpt(EightLayers(4, 1, {1, 3, 3, 1}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<int> stage_of_layer;
  for (const Op& op : m->main_program().ops())
    if (op.type == "layer_norm" && op.stage >= 0) stage_of_layer.push_back(op.stage);
  // 8 layers with two layer norms each, then the final one on the last stage.
  const std::vector<int> want = {0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3};
  EXPECT_EQ(stage_of_layer, want);
}

}  // namespace
}  // namespace pw::testing
