// append-backward on the real model programs: every parameter gets a gradient and an
// optimizer update at its own stage, Megatron's communication appears mirrored in the
// backward, weight-gradient work is marked, and the result trains.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "executor/reference_runner.h"
#include "ir/verifier.h"
#include "models/gpt.h"
#include "models/unet.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"

namespace pw {
namespace {

Module Differentiate(Module module, const std::string& pipeline) {
  PassManager pm;
  Status s = pm.AddPipeline(pipeline);
  EXPECT_TRUE(s.ok()) << s.message();
  auto changed = pm.Run(module);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  return module;
}

std::map<std::string, int> CountOps(const Program& p, OpRole role) {
  std::map<std::string, int> counts;
  for (const Op& op : p.ops())
    if (op.role == role) ++counts[op.type];
  return counts;
}

TEST(AppendBackwardOnModels, GptWithTensorAndPipelineParallelism) {
  models::GptConfig config;
  config.layers = 4;
  config.mp = 2;
  config.pp = 2;
  config.vpp = 2;
  auto built = models::BuildGpt(config);
  ASSERT_TRUE(built.ok()) << built.status().message();
  Module m = Differentiate(*built, "append-backward{optimizer=adam}");
  ASSERT_TRUE(VerifyModule(m, ops::Registry()).ok());
  const Program& p = m.main_program();

  // Every parameter has a gradient var and exactly one adam update at its stage/chunk.
  std::map<std::string, const Op*> updates;
  for (const Op& op : p.ops())
    if (op.role == OpRole::kOptimize) updates[op.Input("Param")] = &op;
  int params = 0;
  for (const Var& v : p.vars()) {
    if (!v.is_parameter) continue;
    ++params;
    ASSERT_TRUE(p.HasVar(GradVarName(v.name))) << v.name;
    ASSERT_TRUE(updates.count(v.name)) << v.name;
    EXPECT_EQ(updates[v.name]->type, "adam");
    EXPECT_EQ(updates[v.name]->stage, v.stage) << v.name;
  }
  EXPECT_EQ(updates.size(), static_cast<size_t>(params));

  // Megatron: one all-reduce per c_identity in backward (f's backward), none for g.
  auto fwd = CountOps(p, OpRole::kForward);
  int backward_allreduce = 0;
  for (const Op& op : p.ops())
    if (op.type == "c_allreduce_sum" && op.role != OpRole::kForward) ++backward_allreduce;
  EXPECT_EQ(backward_allreduce, fwd["c_identity"]);
  EXPECT_EQ(fwd["c_identity"], 2 * config.layers + 1);  // and the vocabulary-parallel head

  // Backward ops keep the stage and chunk placement of their forward ops; weight-grad
  // work is marked and produces only parameter gradients.
  std::set<std::pair<int, int>> fwd_places, bwd_places;
  std::set<std::string> marked_outputs;
  for (const Op& op : p.ops()) {
    if (op.role == OpRole::kForward) fwd_places.insert({op.stage, op.chunk});
    if (op.role != OpRole::kBackward) continue;
    bwd_places.insert({op.stage, op.chunk});
    if (!op.weight_grad) continue;
    op.ForEachOutput([&](const std::string& out) {
      marked_outputs.insert(out);
      const Var* fwd_var = p.FindVar(ForwardVarName(out));
      ASSERT_NE(fwd_var, nullptr) << out;
      EXPECT_TRUE(fwd_var->is_parameter) << out;
    });
  }
  EXPECT_EQ(fwd_places, bwd_places);
  EXPECT_EQ(fwd_places.size(), 4u);  // pp=2 x vpp=2
  // Every parameter gradient is written by weight-grad work, so a zero-bubble split can
  // defer all of it.
  for (const Var& v : p.vars())
    if (v.is_parameter) EXPECT_TRUE(marked_outputs.count(GradVarName(v.name))) << v.name;
}

TEST(AppendBackwardOnModels, UnetSkipConnectionsAccumulateGradients) {
  models::UnetConfig config;
  config.layers = 8;
  config.pp = 4;
  auto built = models::BuildUnet(config);
  ASSERT_TRUE(built.ok()) << built.status().message();
  Module m = Differentiate(*built, "append-backward,dce");
  ASSERT_TRUE(VerifyModule(m, ops::Registry()).ok());
  // Each skip source feeds two consumers, so its gradient is a sum of two contributions.
  int sums = 0;
  for (const Op& op : m.main_program().ops())
    if (op.type == "sum" && op.role == OpRole::kBackward) ++sums;
  EXPECT_GE(sums, 3);
}

TEST(AppendBackwardOnModels, ReferenceTrainingLossFalls) {
  models::GptConfig config;
  config.layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.ffn = 64;
  config.seq = 8;
  config.vocab = 32;
  config.micro_batch_size = 4;
  auto built = models::BuildGpt(config);
  ASSERT_TRUE(built.ok());
  Module m = Differentiate(*built, "append-backward{optimizer=adam,lr=0.01},dce");
  ReferenceOptions options;
  options.steps = 20;
  options.micro_batches = 2;
  auto result = RunReference(m, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->losses.size(), 20u);
  EXPECT_NEAR(result->losses.front(), std::log(32.0), 0.5);
  EXPECT_LT(result->losses.back(), 0.6 * result->losses.front());
}

}  // namespace
}  // namespace pw
