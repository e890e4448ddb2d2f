// DeviceSpec.turn_straggle fitted from measured steps: the share of the straggle whose
// simulated steps come nearest the measured ones, between none and all of it.

#include "simulator/turn_straggle.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace pw::cost {
namespace {

using namespace testing;

// Two ranks, each scaling 2 ms of work and all-reducing on its compute stream.
Module TwoRanksAllReducing() {
  Module m;
  m.name = "turns";
  m.mesh.pp = 2;
  for (int rank = 0; rank < 2; ++rank)
    m.AddProgram(MakeProgram("s" + std::to_string(rank), "forward", rank,
                             {F32("a", 2), F32("b", 2), F32("r", 5)},
                             {Scale("a", "b"), AllReduce("r", "pp")}));
  PlanTwoStagesOneForwardEach(m);
  return m;
}

// Its ops' costs on a node of `cores`, the all-reduce measured at 1 ms with its last member
// 1 ms behind.
OpCostTable TableOn(const Module& m, int cores) {
  DeviceSpec device = TestDevice();
  device.set_cores_per_node(cores);
  OpCostTable table = ScaleCostEstimator(m, device)->table();
  *table.mutable_proto().mutable_device_spec() = device;
  CommFit fit = FitCommSamples("all_reduce", 2, {{1e3, 1e-3, 0}, {1e6, 1e-3, 0}});
  fit.set_straggle(1e-3);
  table.AddComm(fit);
  return table;
}

TEST(TurnStraggle, TheShareMakesTheSimulatedStepsTheMeasuredOnes) {
  const Module m = TwoRanksAllReducing();
  const OpCostTable table = TableOn(m, 1);  // two ranks on one core take turns
  StatusOr<TurnStraggleFit> bounds = FitTurnStraggle({{&m, 1.0}}, table, ops::Registry());
  ASSERT_TRUE(bounds.ok()) << bounds.status().message();
  ASSERT_TRUE(bounds->fitted);
  EXPECT_EQ(bounds->plans, 1);
  // 4 ms of work shared on the core, then the 1 ms all-reduce: the straggle adds 1 ms.
  EXPECT_NEAR(bounds->without, 5e-3, 1e-9);
  EXPECT_NEAR(bounds->with_all, 6e-3, 1e-9);
  EXPECT_DOUBLE_EQ(bounds->share, 1);  // 1 s measured: all of it is not enough
  StatusOr<TurnStraggleFit> fit = FitTurnStraggle({{&m, 5.3e-3}}, table, ops::Registry());
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->share, 0.3, 1e-6);
  EXPECT_NEAR(fit->with_share, 5.3e-3, 1e-9);
  EXPECT_NEAR(fit->measured, 5.3e-3, 1e-12);
  StatusOr<TurnStraggleFit> faster = FitTurnStraggle({{&m, 4e-3}}, table, ops::Registry());
  ASSERT_TRUE(faster.ok());
  EXPECT_DOUBLE_EQ(faster->share, 0);  // even sharing is already as slow as the run
  // Two runs measured 5.2 and 6 ms: the least squares of the relative errors of 5 + s ms,
  // (s - 0.2) / 5.2^2 + (s - 1) / 6^2 = 0.
  StatusOr<TurnStraggleFit> two =
      FitTurnStraggle({{&m, 5.2e-3}, {&m, 6e-3}}, table, ops::Registry());
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->plans, 2);
  const double w1 = 1 / (5.2 * 5.2), w2 = 1 / 36.0;
  EXPECT_NEAR(two->share, (0.2 * w1 + w2) / (w1 + w2), 1e-6);
  EXPECT_NEAR(two->measured, 11.2e-3, 1e-12);
}

TEST(TurnStraggle, NothingToFitWhereTheRanksHaveTheirCores) {
  const Module m = TwoRanksAllReducing();
  StatusOr<TurnStraggleFit> fit = FitTurnStraggle({{&m, 1e-3}}, TableOn(m, 2), ops::Registry());
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_FALSE(fit->fitted);
  EXPECT_EQ(fit->share, 0);
  // Nor from a run that measured no step.
  StatusOr<TurnStraggleFit> unmeasured = FitTurnStraggle({{&m, 0}}, TableOn(m, 1), ops::Registry());
  ASSERT_TRUE(unmeasured.ok());
  EXPECT_FALSE(unmeasured->fitted);
  EXPECT_FALSE(FitTurnStraggle({{&m, 1e-3}}, TableOn(m, 1), ops::Registry(), 1).ok());
}

}  // namespace
}  // namespace pw::cost
