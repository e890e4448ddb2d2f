// balance-stages: boundaries that even out the cost model's stage estimates (GPT-3 6.7B on
// the H100, in bf16 with the vocabulary sharded: the last stage's extra work spread over
// the others, boundaries inside layers), ops and their gradients and updates moved
// together, training bit-identical to the unbalanced plan, statistics, and errors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cost_model/estimator.h"
#include "executor/local_ranks.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;

struct PipelineRun {
  Status status;
  std::map<std::string, int64_t> counters;  // of balance-stages
};

PipelineRun RunPipeline(Module& module, const std::string& pipeline,
                        const std::string& device = "") {
  PassManager pm;
  PassContext context(ops::Registry());
  if (!device.empty())
    context.Attach(*cost::Estimator::Create(*cost::BuiltinDeviceSpec(device), cost::OpCostTable()));
  PipelineRun run;
  run.status = pm.AddPipeline(pipeline);
  if (run.status.ok()) run.status = pm.Run(module, context).status();
  for (const PassStatistics& s : context.statistics())
    if (s.pass == "balance-stages")
      for (const auto& [name, value] : s.counters) run.counters[name] = value;
  return run;
}

std::vector<double> Stages(const PipelineRun& run, const std::string& when, int n) {
  std::vector<double> t;
  for (int k = 0; k < n; ++k) t.push_back(run.counters.at(StrCat("stage", k, "-", when, "-us")));
  return t;
}

Module Gpt67B() {
  models::GptConfig c;
  c.layers = 32, c.hidden = 4096, c.heads = 32, c.ffn = 16384, c.seq = 2048, c.vocab = 51200;
  c.mp = 2, c.pp = 4;
  return *models::BuildGpt(c);
}

TEST(BalanceStagesTest, EvensOutTheGpt67BOnTheH100) {
  Module m = Gpt67B();
  PipelineRun run = RunPipeline(m,
                                "append-backward{optimizer=adam},amp{dtype=bf16},"
                                "balance-stages{report=false}",
                                "h100");
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  std::vector<double> before = Stages(run, "before", 4), after = Stages(run, "after", 4);
  const double mean = std::accumulate(after.begin(), after.end(), 0.0) / 4;
  // Whole layers leave the last stage (head, loss) about 10 % above the others.
  EXPECT_GT(*std::max_element(before.begin(), before.end()), 1.08 * before[0]);
  EXPECT_LT(*std::max_element(after.begin(), after.end()), 1.01 * mean);
  EXPECT_GT(run.counters.at("ops-moved"), 0);
  // Boundaries fall inside layers: op indices, not layer edges only.
  for (int k = 1; k < 4; ++k) EXPECT_GT(run.counters.at(StrCat("boundary", k, "-after-op")), 0);
  // Every grad op and update sits with its forward op.
  std::map<std::string, int> stage_of;
  for (const Op& op : m.main_program().ops())
    if (op.role == OpRole::kForward || op.role == OpRole::kLoss)
      stage_of[OriginName(op)] = op.stage;
  for (const Op& op : m.main_program().ops())
    if (!op.origin.empty()) EXPECT_EQ(op.stage, stage_of.at(op.origin)) << op.type;
  // The forward ops of each stage stay contiguous, stages in order.
  int last = 0;
  for (const Op& op : m.main_program().ops()) {
    if (op.role != OpRole::kForward && op.role != OpRole::kLoss) continue;
    EXPECT_GE(op.stage, last);
    last = op.stage;
  }
}

// Balancing only moves ops between stages: every sum keeps its order, so training is bit
// for bit what the unbalanced plan trains (here a small GPT whose last stage carries a
// large vocabulary).
TEST(BalanceStagesTest, TrainsBitIdenticallyToTheUnbalancedPlan) {
  models::GptConfig c = SmallGptConfig(1, 2);
  c.vocab = 1024;
  const std::string tail = ",split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p";
  std::vector<LocalRunResult> runs;
  for (bool balance : {false, true}) {
    Module m = *models::BuildGpt(c);
    PipelineRun run = RunPipeline(m,
                                  StrCat("append-backward{optimizer=adam}",
                                         balance ? ",balance-stages{report=false}" : "", tail),
                                  "cpu");
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    if (balance) EXPECT_GT(run.counters.at("ops-moved"), 0);
    RankRunOptions o;
    o.steps = 2;
    auto r = RunLocalRanks(m, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runs.push_back(std::move(r).value());
  }
  EXPECT_EQ(runs[0].Losses(), runs[1].Losses());
  std::map<std::string, Tensor> a, b;
  for (auto& p : runs[0].params) a.insert(p.begin(), p.end());
  for (auto& p : runs[1].params) b.insert(p.begin(), p.end());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a)
    EXPECT_EQ(std::memcmp(t.raw(), b.at(name).raw(), t.nbytes()), 0) << name;
}

TEST(BalanceStagesTest, InterleavedChunksKeepTheirPlaces) {
  Module m = *models::BuildGpt(SmallGptConfig(1, 2, 2));
  PipelineRun run = RunPipeline(m, "append-backward,balance-stages{report=false}", "h100");
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_EQ(run.counters.at("virtual-stages"), 4);
  std::vector<std::pair<int, int>> order;
  for (const Op& op : m.main_program().ops()) {
    if (op.role != OpRole::kForward && op.role != OpRole::kLoss) continue;
    std::pair<int, int> p{op.stage, op.chunk};
    if (order.empty() || order.back() != p) order.push_back(p);
  }
  EXPECT_EQ(order, (std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}}));
}

TEST(BalanceStagesTest, RefusesModulesItCannotBalance) {
  Module m = *models::BuildGpt(SmallGptConfig(1, 2));
  PipelineRun run = RunPipeline(m, "balance-stages");
  EXPECT_THAT(run.status.message(), HasSubstr("put append-backward before it"));
  run = RunPipeline(m, "append-backward,split-program,balance-stages");
  EXPECT_THAT(run.status.message(), HasSubstr("put it before split-program"));
  // A backward op that names no forward op (a hand-written program).
  Module h = *models::BuildGpt(SmallGptConfig(1, 2));
  ASSERT_TRUE(RunPipeline(h, "append-backward").status.ok());
  for (Op& op : h.main_program().ops())
    if (op.role == OpRole::kBackward) {
      op.origin.clear();
      break;
    }
  run = RunPipeline(h, "balance-stages");
  EXPECT_THAT(run.status.message(), HasSubstr("names no forward op"));
}

}  // namespace
}  // namespace pw::testing
