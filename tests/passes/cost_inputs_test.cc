// How `pipeweave opt --device --costs` (and sim) hand the cost model to passes.

#include "passes/cost_inputs.h"

#include <gtest/gtest.h>

#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

const std::string kCorpus = std::string(PW_SOURCE_DIR) + "/tests/cli/bad_inputs/";

// A pass that only looks for the cost model, as a pricing pass would.
class LooksForCosts final : public Pass {
 public:
  std::string_view name() const override { return "looks-for-costs"; }
  std::string_view description() const override { return "records what the context offers"; }
  StatusOr<bool> Run(Module&, PassContext& context) override {
    estimator = context.Find<cost::Estimator>();
    simulator = context.Find<cost::Simulator>();
    return false;
  }
  const cost::Estimator* estimator = nullptr;
  const cost::Simulator* simulator = nullptr;
};

TEST(CostInputs, PassesFindTheEstimatorAndTheSimulator) {
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().message();
  PassContext context(ops::Registry());
  AttachCostModel(*estimator, context);
  PassManager manager;
  manager.EnableVerifier(false);  // the pass looks at the context, not the module
  auto pass = std::make_unique<LooksForCosts>();
  LooksForCosts* seen = pass.get();
  manager.AddPass(std::move(pass));
  Module module;
  module.name = "empty";
  auto ran = manager.Run(module, context);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  ASSERT_NE(seen->estimator, nullptr);
  EXPECT_EQ(seen->estimator->device().name(), "h100-sxm");
  ASSERT_NE(seen->simulator, nullptr);
  EXPECT_EQ(&seen->simulator->estimator(), seen->estimator);
}

TEST(CostInputs, AMeasuredTableComesWithItsDevice) {
  auto estimator = MakeEstimator("cpu", kCorpus + "costs_cpu.pbtxt");
  ASSERT_TRUE(estimator.ok()) << estimator.status().message();
  EXPECT_EQ((*estimator)->table().size(), 1u);
}

TEST(CostInputs, RefusesATableOfAnotherDevice) {
  auto estimator = MakeEstimator("h100", kCorpus + "costs_cpu.pbtxt");
  ASSERT_FALSE(estimator.ok());
  EXPECT_NE(estimator.status().message().find("measured on device 'cpu'"), std::string::npos)
      << estimator.status().message();
}

}  // namespace
}  // namespace pw
