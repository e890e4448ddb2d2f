// order-comm's stage costs: priced by the cost model attached to the PassContext (`opt
// --device/--costs`), each replaced by the option the user gives; without a cost model
// all four options are needed, and the first one missing is named in one error line.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cost_model/device_spec.h"
#include "cost_model/estimator.h"
#include "ir/plan_actions.h"
#include "models/unet.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/stage_pricing.h"

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

}  // namespace
}  // namespace pw::pipeline
