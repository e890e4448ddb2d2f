// amp on the GPT: what each op computes in, the f32 master weights and their one refresh
// per step, f32 master gradients, one cast per var and placement, the low-precision dp
// all-reduce, and the split programs that result.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

Module AmpGpt(const std::string& amp, int mp = 2, int pp = 2, int dp = 1,
              const std::string& after = "") {
  auto built = models::BuildGpt(SmallGptConfig(mp, pp));
  EXPECT_TRUE(built.ok());
  Module m = std::move(built).value();
  m.mesh.dp = dp;
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline("append-backward{optimizer=adam}," + amp + after).ok());
  auto run = pm.Run(m);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return m;
}

DataType DtypeOf(const Program& p, const std::string& var) { return p.FindVar(var)->dtype; }

TEST(AmpPassTest, ParametersAreReadThroughACopyRefreshedOncePerStep) {
  Module m = AmpGpt("amp{dtype=bf16}");
  const Program& p = m.main_program();
  const std::vector<Op>& ops = p.ops();
  int params = 0;
  for (const Var& param : p.vars()) {
    if (!param.is_parameter) continue;
    ++params;
    const std::string copy = param.name + "@bf16";
    const Var* c = p.FindVar(copy);
    ASSERT_NE(c, nullptr) << param.name;
    EXPECT_TRUE(c->persistable);
    EXPECT_FALSE(c->is_parameter);
    EXPECT_EQ(c->dtype, DataType::kBFloat16);
    EXPECT_EQ(c->init, param.init);  // the same values (and shard) as the master, rounded
    int writers = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      bool reads_master = false, writes_copy = false;
      ops[i].ForEachInput([&](const std::string& v) { reads_master |= v == param.name; });
      ops[i].ForEachOutput([&](const std::string& v) { writes_copy |= v == copy; });
      if (ops[i].role != OpRole::kOptimize) EXPECT_FALSE(reads_master) << param.name;
      if (!writes_copy) continue;
      ++writers;
      EXPECT_EQ(ops[i].type, "cast");
      EXPECT_EQ(ops[i].role, OpRole::kOptimize);
      EXPECT_EQ(ops[i].Input("X"), param.name);
      ASSERT_GT(i, 0u);
      EXPECT_EQ(ops[i - 1].type, "adam");  // right after the update
      EXPECT_EQ(ops[i - 1].Output("ParamOut"), param.name);
    }
    EXPECT_EQ(writers, 1) << param.name;
  }
  EXPECT_GT(params, 0);
  EXPECT_EQ(m.metadata.GetString("amp"), "bf16");
}

// Every gradient the optimizer reads is f32: written by the weight-gradient GEMM itself
// (out_dtype=f32: its f32 sums of the f16 operands, no f16 gradient) or cast from the f16
// gradient of the op that finishes it.
TEST(AmpPassTest, MasterGradientsAreF32FromTheGemmOrACastOfTheLowGradient) {
  Module m = AmpGpt("amp{dtype=fp16,loss-scaling=none}");
  const Program& p = m.main_program();
  std::map<std::string, const Op*> writer;
  for (const Op& op : p.ops())
    op.ForEachOutput([&](const std::string& v) { writer.emplace(v, &op); });
  int gemm_grads = 0, cast_grads = 0;
  for (const Op& op : p.ops()) {
    if (op.type != "adam") continue;
    const std::string& g = op.Input("Grad");
    EXPECT_EQ(DtypeOf(p, g), DataType::kFloat32) << g;
    const Op* w = writer.at(g);
    EXPECT_EQ(w->role, OpRole::kBackward) << g;
    if (w->type == "matmul_weight_grad") {
      EXPECT_EQ(w->attrs.GetString("out_dtype"), "f32") << g;
      w->ForEachInput([&](const std::string& v) {
        EXPECT_EQ(DtypeOf(p, v), DataType::kFloat16) << g << " reads " << v;
      });
      EXPECT_EQ(p.FindVar(ForwardVarName(g) + "@f16@GRAD"), nullptr) << g;
      ++gemm_grads;
      continue;
    }
    EXPECT_EQ(w->type, "cast") << g;
    EXPECT_EQ(DtypeOf(p, w->Input("X")), DataType::kFloat16) << g;
    EXPECT_EQ(w->Input("X"), ForwardVarName(g) + "@f16@GRAD");
    ++cast_grads;
  }
  EXPECT_GT(gemm_grads, 0);  // the linear weights
  EXPECT_GT(cast_grads, 0);  // biases, norms, the embedding
}

TEST(AmpPassTest, ComputeInLowPrecisionLossAndStatisticsInF32) {
  Module m = AmpGpt("amp{dtype=bf16}");
  const Program& p = m.main_program();
  for (const Op& op : p.ops()) {
    // (The cross-entropy's statistics, logits.*, are all-reduced in f32.)
    const bool activation_sum =
        op.type == "c_allreduce_sum" && !op.Input("X").starts_with("logits.");
    if (op.type == "matmul" || op.type == "attention" || op.type == "gelu" || activation_sum ||
        op.type == "matmul_weight_grad") {
      op.ForEachInput([&](const std::string& v) {
        EXPECT_EQ(DtypeOf(p, v), DataType::kBFloat16) << op.type << " " << v;
      });
      // A weight-gradient GEMM finishing a parameter's gradient writes it in f32.
      const DataType out =
          op.attrs.GetString("out_dtype", "") == "f32" ? DataType::kFloat32 : DataType::kBFloat16;
      op.ForEachOutput(
          [&](const std::string& v) { EXPECT_EQ(DtypeOf(p, v), out) << op.type << " " << v; });
    }
    if (op.type == "c_softmax_cross_entropy" || op.type == "c_softmax_stats" || op.type == "mean") {
      op.ForEachOutput([&](const std::string& v) {
        EXPECT_EQ(DtypeOf(p, v), DataType::kFloat32) << op.type << " " << v;
      });
    }
    if (op.type == "layer_norm") {
      EXPECT_EQ(DtypeOf(p, op.Output("Y")), DataType::kBFloat16);
      EXPECT_EQ(DtypeOf(p, op.Output("Mean")), DataType::kFloat32);
      EXPECT_EQ(DtypeOf(p, op.Output("Rstd")), DataType::kFloat32);
    }
  }
  EXPECT_EQ(DtypeOf(p, "loss"), DataType::kFloat32);
}

TEST(AmpPassTest, OneCastPerVarDtypeAndPlacement) {
  Module m = AmpGpt("amp{dtype=bf16}");
  std::set<std::tuple<std::string, std::string, int, int>> seen;
  int casts = 0;
  for (const Op& op : m.main_program().ops()) {
    if (op.type != "cast" || op.role == OpRole::kOptimize) continue;
    ++casts;
    auto key = std::make_tuple(op.Input("X"), op.attrs.GetString("dtype"), op.stage, op.chunk);
    EXPECT_TRUE(seen.insert(key).second) << op.Input("X");
  }
  EXPECT_GT(casts, 0);
}

TEST(AmpPassTest, LowPrecisionDpAllReduceInTheOptimizer) {
  Module m = AmpGpt("amp{dtype=bf16,grad-allreduce=low}", 2, 2, /*dp=*/2);
  const Program& p = m.main_program();
  int reduces = 0;
  for (const Op& op : p.ops()) {
    if (op.type == "adam") {
      EXPECT_THAT(op.Input("Grad"), ::testing::EndsWith("@GRAD@dp"));
      EXPECT_EQ(DtypeOf(p, op.Input("Grad")), DataType::kFloat32);
    }
    if (op.type == "c_allreduce_sum" && op.attrs.GetString("group") == "dp") {
      ++reduces;
      EXPECT_EQ(op.role, OpRole::kOptimize);
      EXPECT_EQ(DtypeOf(p, op.Input("X")), DataType::kBFloat16);
    }
  }
  EXPECT_GT(reduces, 0);
  // With one replica there is nothing to all-reduce: the optimizer reads the gradients.
  Module one = AmpGpt("amp{dtype=bf16,grad-allreduce=low}", 2, 2, /*dp=*/1);
  for (const Op& op : one.main_program().ops())
    EXPECT_FALSE(op.type == "c_allreduce_sum" && op.attrs.GetString("group") == "dp");
}

// grad-accumulation=low: the backward writes 16-bit gradients (no f32 GEMM output, no cast
// after it), so the executor sums micro-batches in 16 bits and all-reduces the sums as they
// are; the optimizer casts them to f32 before the update and reduces nothing itself.
TEST(AmpPassTest, LowGradientSumsAreCastByTheOptimizer) {
  for (int dp : {1, 2}) {
    SCOPED_TRACE(StrCat("dp ", dp));
    Module m = AmpGpt("amp{dtype=bf16,grad-accumulation=low}", 2, 2, dp);
    const Program& p = m.main_program();
    int updates = 0;
    for (const Op& op : p.ops()) {
      EXPECT_FALSE(op.attrs.Has("out_dtype")) << op.type;
      EXPECT_FALSE(op.type == "c_allreduce_sum" && op.attrs.GetString("group") == "dp");
      if (op.role != OpRole::kOptimize) {
        op.ForEachOutput([&](const std::string& v) {
          if (v.ends_with("@GRAD") && p.FindVar(ForwardVarName(v))->is_parameter)
            EXPECT_EQ(DtypeOf(p, v), DataType::kBFloat16) << v;
        });
        continue;
      }
      if (op.type == "adam") {
        ++updates;
        EXPECT_THAT(op.Input("Grad"), ::testing::EndsWith("@GRAD@f32"));
        EXPECT_EQ(DtypeOf(p, op.Input("Grad")), DataType::kFloat32);
      }
    }
    EXPECT_GT(updates, 0);
  }
}

// After split-program the copies are state of each stage: the forward reads them and the
// optimizer of the same stage writes them; persistable, so no send/recv ever moves them.
TEST(AmpPassTest, SplitProgramsKeepTheCopiesOnTheirStage) {
  Module m = AmpGpt("amp{dtype=bf16}", 2, 2, 1, ",split-program");
  std::map<std::string, int> written_at;
  for (const Program& p : m.programs()) {
    if (p.info().kind != "optimizer") continue;
    for (const Op& op : p.ops())
      op.ForEachOutput([&](const std::string& v) {
        if (v.ends_with("@bf16")) written_at[v] = p.info().stage;
      });
  }
  ASSERT_FALSE(written_at.empty());
  for (const Program& p : m.programs()) {
    if (p.info().kind != "forward") continue;
    for (const Op& op : p.ops())
      op.ForEachInput([&](const std::string& v) {
        if (!written_at.count(v)) return;
        EXPECT_EQ(written_at.at(v), p.info().stage) << v;
        EXPECT_TRUE(p.FindVar(v)->persistable) << v;
      });
  }
}

int Count(const Module& m, const std::string& type) {
  int n = 0;
  for (const Op& op : m.main_program().ops()) n += op.type == type;
  return n;
}

// Each stage's check lists exactly the gradients its updates read.
void ExpectChecksMatchTheirStages(const Module& m) {
  std::map<std::pair<int, int>, std::multiset<std::string>> checked, updated;
  for (const Op& op : m.main_program().ops()) {
    if (op.type == "check_finite_and_unscale")
      for (const std::string& g : *op.FindOutput("Out")) checked[{op.stage, op.chunk}].insert(g);
    if (op.type == "adam") {
      updated[{op.stage, op.chunk}].insert(op.Input("Grad"));
      EXPECT_FALSE(op.Input("SkipUpdate").empty());
    }
  }
  EXPECT_EQ(checked, updated);
}

TEST(AmpPassTest, Fp16ScalesTheLossAndChecksEveryStage) {
  Module m = AmpGpt("amp{dtype=fp16,init-scale=1024,growth-interval=10}");
  const Program& p = m.main_program();
  for (const Op& op : p.ops())
    if (op.Output("Out") == "loss@GRAD") {
      EXPECT_EQ(op.type, "scale");
      EXPECT_EQ(op.Input("X"), "amp.loss_scale");
    }
  const Var* scale = p.FindVar("amp.loss_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_TRUE(scale->persistable);
  EXPECT_EQ(scale->init.value, 1024);
  EXPECT_EQ(Count(m, "check_finite_and_unscale"), 2);  // one per stage
  EXPECT_EQ(Count(m, "update_loss_scaling"), 2);
  std::multiset<std::string> groups;
  for (const Op& op : p.ops())
    if (op.type == "c_allreduce_max" && op.role == OpRole::kOptimize)
      groups.insert(op.attrs.GetString("group"));
  EXPECT_EQ(groups, (std::multiset<std::string>{"mp", "mp", "pp", "pp"}));
  ExpectChecksMatchTheirStages(m);
  for (const Op& op : p.ops())
    if (op.type == "update_loss_scaling") EXPECT_EQ(op.attrs.GetInt("growth_interval"), 10);
}

TEST(AmpPassTest, LossScalingFollowsTheDtypeUnlessAsked) {
  EXPECT_EQ(Count(AmpGpt("amp{dtype=bf16}"), "update_loss_scaling"), 0);
  EXPECT_EQ(Count(AmpGpt("amp{dtype=bf16,loss-scaling=dynamic}"), "update_loss_scaling"), 2);
  EXPECT_EQ(Count(AmpGpt("amp{dtype=fp16,loss-scaling=none}"), "update_loss_scaling"), 0);
}

// Interleaved chunks: one check per rank over every chunk's gradients, placed with its first
// chunk, before any of its updates; every update of the rank skips on that one flag.
TEST(AmpPassTest, LossScalingChecksEveryChunkOfARankOnce) {
  auto built = models::BuildGpt(SmallGptConfig(2, 2, 2));
  ASSERT_TRUE(built.ok());
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("append-backward{optimizer=adam},amp{dtype=fp16}").ok());
  ASSERT_TRUE(pm.Run(*built).ok());
  const std::vector<Op>& ops = built->main_program().ops();
  std::map<int, const Op*> check_of_stage;
  for (const Op& op : ops)
    if (op.type == "check_finite_and_unscale") {
      EXPECT_EQ(op.chunk, 0);
      EXPECT_TRUE(check_of_stage.emplace(op.stage, &op).second) << "stage " << op.stage;
    }
  ASSERT_EQ(check_of_stage.size(), 2u);
  EXPECT_EQ(Count(*built, "update_loss_scaling"), 2);
  std::map<int, std::set<int>> chunks_checked;
  bool seen_check = false;
  for (const Op& op : ops) {
    seen_check = seen_check || op.type == "check_finite_and_unscale";
    if (op.type != "adam") continue;
    EXPECT_TRUE(seen_check) << "an update before its check";
    const Op& check = *check_of_stage.at(op.stage);
    const std::vector<std::string>& outs = *check.FindOutput("Out");
    EXPECT_NE(std::find(outs.begin(), outs.end(), op.Input("Grad")), outs.end());
    EXPECT_EQ(op.Input("SkipUpdate"), StrCat(check.Output("FoundInfinite"), "@mp@pp"));
    chunks_checked[op.stage].insert(op.chunk);
  }
  for (const auto& [stage, chunks] : chunks_checked) EXPECT_EQ(chunks.size(), 2u) << stage;
}

// balance-stages moves updates between stages: the per-stage checks are rebuilt to match.
TEST(AmpPassTest, BalanceStagesRestagesTheChecks) {
  models::GptConfig c = SmallGptConfig(1, 2);
  c.vocab = 1024;  // a heavy last stage
  Module m = *models::BuildGpt(c);
  PassManager pm;
  ASSERT_TRUE(
      pm.AddPipeline("append-backward{optimizer=adam},amp{dtype=fp16},balance-stages{report=false}")
          .ok());
  PassContext context(ops::Registry());
  ASSERT_TRUE(pm.Run(m, context).ok());
  int64_t moved = 0;
  for (const PassStatistics& s : context.statistics())
    for (const auto& [name, value] : s.counters)
      if (s.pass == "balance-stages" && name == "ops-moved") moved = value;
  EXPECT_GT(moved, 0);
  EXPECT_EQ(Count(m, "check_finite_and_unscale"), 2);
  ExpectChecksMatchTheirStages(m);
}

}  // namespace
}  // namespace pw::testing
