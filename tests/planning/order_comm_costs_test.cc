// The stage costs of the passes that plan by cost (order-comm; schedule's zb-h2 and
// zb-auto): priced by the cost model attached to the PassContext (`opt --device/--costs`),
// each replaced by the option the user gives. Without a cost model order-comm needs all four
// options and names the first one missing in one error line; schedule plans with unit costs.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "cost_model/device_spec.h"
#include "cost_model/estimator.h"
#include "ir/plan_actions.h"
#include "models/gpt.h"
#include "models/unet.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/stage_pricing.h"
#include "simulator/action_simulator.h"
#include "simulator/simulator.h"

namespace pw::pipeline {
namespace {

// A U-Net (skip connections across stages) through append-backward, split-program and a
// 1f1b schedule of 2 * pp micro-batches: what order-comm lowers.
Module PlannedUnet(int pp, bool split_backward) {
  models::UnetConfig config;
  config.layers = 2 * pp;
  config.hidden = 16;
  config.seq = 8;
  config.vocab = 32;
  config.pp = pp;
  StatusOr<Module> m = models::BuildUnet(config);
  EXPECT_TRUE(m.ok()) << m.status().message();
  PassManager manager;
  Status added = manager.AddPipeline(StrCat(
      "append-backward,split-program{split-backward=", split_backward ? "true" : "false",
      "},schedule{kind=", split_backward ? "zb-h1" : "1f1b", ",micro-batches=", 2 * pp, "}"));
  EXPECT_TRUE(added.ok()) << added.message();
  StatusOr<bool> ran = manager.Run(*m);
  EXPECT_TRUE(ran.ok()) << ran.status().message();
  return std::move(*m);
}

std::shared_ptr<cost::Estimator> H100() {
  StatusOr<cost::DeviceSpec> device = cost::ResolveDeviceSpec("h100");
  EXPECT_TRUE(device.ok()) << device.status().message();
  StatusOr<std::shared_ptr<cost::Estimator>> estimator =
      cost::Estimator::Create(*device, cost::OpCostTable{});
  EXPECT_TRUE(estimator.ok()) << estimator.status().message();
  return *estimator;
}

// Runs `pipeline` on `module` with the cost model attached or not.
Status RunPasses(Module& module, const std::string& pipeline,
                 std::shared_ptr<cost::Estimator> estimator) {
  PassContext context(ops::Registry());
  if (estimator) context.Attach(std::move(estimator));
  PassManager manager;
  PW_RETURN_IF_ERROR(manager.AddPipeline(pipeline));
  return manager.Run(module, context).status();
}

TEST(OrderCommCosts, PriceStagesFromTheCostModel) {
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split backward" : "whole backward");
    Module m = PlannedUnet(4, split);
    StatusOr<ModuleStages> stages = ReadModuleStages(m);
    ASSERT_TRUE(stages.ok()) << stages.status().message();
    StatusOr<ActionCosts> costs = PriceStages(m, *stages, *H100(), ops::Registry());
    ASSERT_TRUE(costs.ok()) << costs.status().message();
    EXPECT_GT(costs->forward, 0);
    EXPECT_GT(costs->backward, 0);
    // A whole backward is priced as B; a split one as I and W.
    if (split)
      EXPECT_GT(costs->weight, 0);
    else
      EXPECT_EQ(costs->weight, 0);
    EXPECT_GT(costs->comm, 0);  // every stage on its own rank
    ASSERT_EQ(costs->stage_scale.size(), 4u);
    double sum = 0;
    for (double s : costs->stage_scale) sum += s;
    EXPECT_NEAR(sum, 4, 1e-9);  // each stage's total against the mean
  }
}

TEST(OrderCommCosts, PassSearchesWithTheCostModel) {
  Module m = PlannedUnet(6, false);
  Status st = RunPasses(m, "order-comm", H100());
  ASSERT_TRUE(st.ok()) << st.message();
  StatusOr<ActionSchedule> lowered = PlanToActionSchedule(m.plan);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_TRUE(lowered->HasComms());
}

TEST(OrderCommCosts, WithoutACostModelEveryCostIsAnOption) {
  struct Case {
    std::string pipeline, missing;
  };
  for (const Case& c :
       {Case{"order-comm", "option 'F'"}, Case{"order-comm{F=1,W=1,comm=0.5}", "option 'B'"},
        Case{"order-comm{F=1,B=1,W=1}", "option 'comm'"}}) {
    SCOPED_TRACE(c.pipeline);
    Module m = PlannedUnet(4, false);
    Status st = RunPasses(m, c.pipeline, nullptr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(c.missing), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("--device"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  }
  Module m = PlannedUnet(4, false);
  Status st = RunPasses(m, "order-comm{F=1,B=1,W=1,comm=0.5}", nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
}

// A GPT on 4 stages, one layer fewer on the first and last (which hold the embedding and
// the LM head), its backward split into I and W: what schedule plans. Priced on an H100,
// W (the weight-gradient GEMMs adding into the gradient sums) is 0.71 F, near the Zero Bubble
// paper's A100 figures (0.50-0.74 F, its Table 9).
Module SplitGpt() {
  models::GptConfig config;
  config.layers = 14;
  config.stage_layers = {3, 4, 4, 3};
  config.hidden = 1024;
  config.heads = 16;
  config.ffn = 4096;
  config.seq = 512;
  config.vocab = 8192;
  config.micro_batch_size = 2;
  config.pp = 4;
  StatusOr<Module> m = models::BuildGpt(config);
  EXPECT_TRUE(m.ok()) << m.status().message();
  Status st = RunPasses(*m, "append-backward,split-program{split-backward=true}", nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
  return std::move(*m);
}

// Runs the one pass of `pipeline` on `module`, returning its counters.
std::map<std::string, int64_t> Counters(Module& module, const std::string& pipeline,
                                        std::shared_ptr<cost::Estimator> estimator) {
  PassContext context(ops::Registry());
  if (estimator) context.Attach(std::move(estimator));
  PassManager manager;
  EXPECT_TRUE(manager.AddPipeline(pipeline).ok());
  StatusOr<bool> ran = manager.Run(module, context);
  EXPECT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_EQ(context.statistics().size(), 1u) << pipeline;
  std::map<std::string, int64_t> counters;
  for (const PassStatistics& s : context.statistics())
    counters.insert(s.counters.begin(), s.counters.end());
  return counters;
}

ActionSchedule Planned(const Module& m) {
  StatusOr<ActionSchedule> lowered = PlanToActionSchedule(m.plan);
  EXPECT_TRUE(lowered.ok()) << lowered.status().message();
  return lowered.ok() ? *lowered : ActionSchedule{};
}

TEST(ScheduleCosts, ZbAutoPlansWithTheCostModelsStagePrices) {
  Module unpriced = SplitGpt();
  StatusOr<ModuleStages> stages = ReadModuleStages(unpriced);
  ASSERT_TRUE(stages.ok()) << stages.status().message();
  StatusOr<ActionCosts> priced = PriceStages(unpriced, *stages, *H100(), ops::Registry());
  ASSERT_TRUE(priced.ok()) << priced.status().message();
  // ZB-1p: activations of at most P micro-batches per rank, where what runs in the gaps
  // depends most on what each action costs.
  const std::string zb_auto = "schedule{kind=zb-auto,micro-batches=12,mem-limit=4";

  Module m = unpriced;
  std::map<std::string, int64_t> counters = Counters(m, zb_auto + "}", H100());
  EXPECT_EQ(counters["priced-F-us"], std::llround(1e3 * priced->forward));
  EXPECT_EQ(counters["priced-B-us"], std::llround(1e3 * priced->backward));
  EXPECT_EQ(counters["priced-W-us"], std::llround(1e3 * priced->weight));
  EXPECT_EQ(counters["priced-comm-us"], std::llround(1e3 * priced->comm));
  EXPECT_GT(counters["priced-W-us"], 0);
  // comm is the hidden state a stage hands on (f32 [2, 512, 1024]), not what it keeps for
  // its backward.
  const double hidden_bytes = 2.0 * 512 * 1024 * 4;
  EXPECT_DOUBLE_EQ(priced->comm, 1e3 * H100()
                                           ->comm()
                                           .Time(cost::CommKind::kSendRecv, hidden_bytes, 2,
                                                 cost::GroupSpan::Pair(false))
                                           .seconds);

  // Simulated with those costs, its plan is shorter than the one it makes with unit costs
  // (no cost model): 140.6 against 153.4 ms, 8 % (W is 0.71 F, B 1.22 F here).
  Module unit = unpriced;
  EXPECT_EQ(Counters(unit, zb_auto + "}", nullptr).count("priced-F-us"), 0u);
  SimulationOptions sim;
  sim.costs = *priced;
  sim.semantics = CommSemantics::kRendezvous;
  StatusOr<TimedResult> with_prices = SimulateTimed(Planned(m), sim);
  StatusOr<TimedResult> with_units = SimulateTimed(Planned(unit), sim);
  ASSERT_TRUE(with_prices.ok() && with_units.ok());
  EXPECT_LT(with_prices->makespan, 0.97 * with_units->makespan);

  // A figure given replaces its price; the others stay the cost model's.
  Module given = unpriced;
  counters = Counters(given, zb_auto + ",F=2.5}", H100());
  EXPECT_EQ(counters["priced-F-us"], 2500);
  EXPECT_EQ(counters["priced-B-us"], std::llround(1e3 * priced->backward));
}

// insert-p2p's batched order places each transfer where it happens in a run of the plan:
// at the cost model's prices when one is attached. zb-auto's W is cheaper than F there, so
// unit costs put some recvs in a batch with transfers due later, and the batch holds the
// rank until the later one arrives. Simulated op by op with NCCL's blocking p2p: 180.9
// against 189.3 ms.
TEST(InsertP2PCosts, BatchedOrderFollowsThePricedRun) {
  Module planned = SplitGpt();
  Counters(planned, "schedule{kind=zb-auto,micro-batches=16,mem-limit=8}", H100());
  Module at_prices = planned, at_units = planned;
  EXPECT_EQ(Counters(at_prices, "insert-p2p{order=batched}", H100())["ordered-at-priced-costs"], 1);
  EXPECT_EQ(
      Counters(at_units, "insert-p2p{order=batched}", nullptr).count("ordered-at-priced-costs"),
      0u);
  cost::SimOptions options;
  options.rendezvous_p2p = true;
  options.record_timeline = false;
  const cost::Simulator simulator(H100(), ops::Registry(), options);
  StatusOr<cost::SimResult> by_prices = simulator.Run(at_prices);
  StatusOr<cost::SimResult> by_units = simulator.Run(at_units);
  ASSERT_TRUE(by_prices.ok()) << by_prices.status().message();
  ASSERT_TRUE(by_units.ok()) << by_units.status().message();
  EXPECT_LT(by_prices->step_time, 0.97 * by_units->step_time);
}

TEST(ScheduleCosts, WithoutACostModelZbAutoPlansWithUnitCosts) {
  Module implicit = SplitGpt(), explicit_units = SplitGpt();
  Counters(implicit, "schedule{kind=zb-auto,micro-batches=8,mem-limit=6}", nullptr);
  Counters(explicit_units, "schedule{kind=zb-auto,micro-batches=8,mem-limit=6,F=1,B=1,W=1,comm=0}",
           nullptr);
  EXPECT_EQ(Planned(implicit).ranks, Planned(explicit_units).ranks);
}

}  // namespace
}  // namespace pw::pipeline
