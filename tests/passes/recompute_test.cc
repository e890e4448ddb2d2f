// recompute on the GPT: which forward ops run again (full: a layer's chain from its input;
// selective: the attention core), where they go (before the first backward op that reads
// them), what the backward reads afterwards, and the errors of a misplaced pass.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "models/gpt.h"
#include "passes/pass_manager.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kSuffix = "@RECOMPUTE";

bool Recomputed(const std::string& v) {
  return v.size() > kSuffix.size() &&
         v.compare(v.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

StatusOr<Module> Gpt(const std::string& pipeline, int mp = 1, int pp = 1) {
  auto built = models::BuildGpt(SmallGptConfig(mp, pp));
  if (!built.ok()) return built.status();
  Module m = std::move(built).value();
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  PW_RETURN_IF_ERROR(pm.Run(m).status());
  return m;
}

// The recomputed ops, by the var their first output recomputes.
std::vector<const Op*> Clones(const Module& m) {
  std::vector<const Op*> out;
  for (const Op& op : m.main_program().ops())
    if (!op.outputs.empty() && !op.outputs[0].vars.empty() && Recomputed(op.outputs[0].vars[0]))
      out.push_back(&op);
  return out;
}

TEST(RecomputePassTest, FullRunsEachLayersChainAgainBeforeItsBackward) {
  auto m = Gpt("append-backward,recompute{policy=full}", 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::vector<Op>& ops = m->main_program().ops();
  std::vector<const Op*> clones = Clones(*m);
  // Per layer: ln1, c_identity, qkv matmul + bias, attention, proj matmul + all-reduce +
  // bias, the residual add, ln2, c_identity, fc1 matmul + bias, gelu. Not fc2's matmul,
  // all-reduce and bias, nor the last residual add: the next layer's checkpoint.
  EXPECT_EQ(clones.size(), 4u * 14);
  std::set<std::string> recomputed;
  for (const Op* c : clones) {
    EXPECT_EQ(c->role, OpRole::kBackward);
    EXPECT_FALSE(c->origin.empty());
    c->ForEachOutput([&](const std::string& v) { recomputed.insert(v); });
  }
  EXPECT_TRUE(recomputed.count("layer2.attn.probs@RECOMPUTE"));
  EXPECT_TRUE(recomputed.count("layer2.gelu@RECOMPUTE"));
  EXPECT_FALSE(recomputed.count("layer2.residual2@RECOMPUTE"));  // kept: the checkpoint
  EXPECT_FALSE(recomputed.count("layer2.fc2.matmul@RECOMPUTE"));

  // No backward op reads a forward activation of a layer any more, except checkpoints
  // (a layer's output, the embeddings) and what the loss head made.
  bool in_backward = false;
  for (const Op& op : ops) {
    in_backward = in_backward || op.role == OpRole::kBackward;
    if (!in_backward || Recomputed(op.outputs.empty() ? "" : op.outputs[0].vars[0])) continue;
    op.ForEachInput([&](const std::string& v) {
      if (v.rfind("layer", 0) != 0 || v.find("@GRAD") != std::string::npos || Recomputed(v)) return;
      const Var* var = m->main_program().FindVar(v);
      if (var->persistable) return;
      EXPECT_TRUE(v.find("residual2") != std::string::npos) << op.type << " reads " << v;
    });
  }

  // Each recomputed var is made before its first reader.
  std::map<std::string, size_t> made;
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].ForEachInput([&](const std::string& v) {
      if (Recomputed(v)) EXPECT_TRUE(made.count(v)) << v << " read before it is recomputed";
    });
    ops[i].ForEachOutput([&](const std::string& v) { made.emplace(v, i); });
  }
}

TEST(RecomputePassTest, SelectiveRunsOnlyTheAttentionCoreAgain) {
  auto m = Gpt("append-backward,recompute{policy=selective}");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<const Op*> clones = Clones(*m);
  ASSERT_EQ(clones.size(), 4u);  // one per layer
  for (const Op* c : clones) {
    EXPECT_EQ(c->type, "attention");
    EXPECT_FALSE(Recomputed(c->Input("QKV")));  // its input is kept
  }
  for (const Op& op : m->main_program().ops())
    if (op.type == "attention_grad")
      EXPECT_TRUE(Recomputed(op.Input("Probs"))) << op.Input("Probs");
}

TEST(RecomputePassTest, WeightCopiesOfAmpAreNotRecomputed) {
  auto m = Gpt("append-backward{optimizer=adam},amp{dtype=bf16},recompute", 2, 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const Op* c : Clones(*m)) {
    bool reads_activation = false;
    c->ForEachInput([&](const std::string& v) {
      reads_activation |= !m->main_program().FindVar(v)->persistable;
    });
    EXPECT_TRUE(reads_activation) << c->type << " " << c->outputs[0].vars[0];
  }
}

TEST(RecomputePassTest, ASecondRunFindsNothingLeftToRecompute) {
  auto once = Gpt("append-backward,recompute");
  auto twice = Gpt("append-backward,recompute,recompute");
  ASSERT_TRUE(once.ok() && twice.ok());
  EXPECT_EQ(once->main_program().ops(), twice->main_program().ops());
}

TEST(RecomputePassTest, RefusesAModuleWithoutBackwardOrAlreadySplit) {
  auto before = Gpt("recompute");
  ASSERT_FALSE(before.ok());
  EXPECT_THAT(before.status().message(), HasSubstr("put it after append-backward"));
  auto split = Gpt("append-backward,split-program,recompute", 1, 2);
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("before balance-stages and split-program"));
  auto policy = Gpt("append-backward,recompute{policy=some}");
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(policy.status().message(), HasSubstr("policy"));
}

}  // namespace
}  // namespace pw::testing
