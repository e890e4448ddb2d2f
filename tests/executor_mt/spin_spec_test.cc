// The CPU device spec prices the executor's spin (DeviceSpec.spin_budget and
// long_spin_budget): the two must not drift apart.
#include <gtest/gtest.h>

#include <chrono>

#include "cost_model/device_spec.h"
#include "executor/cpu/spin_wait.h"

namespace pw {
namespace {

TEST(SpinSpec, TheCpuSpecHoldsTheExecutorsSpinBudgets) {
  auto spec = cost::BuiltinDeviceSpec("cpu");
  ASSERT_TRUE(spec.ok());
  using Seconds = std::chrono::duration<double>;
  EXPECT_DOUBLE_EQ(spec->spin_budget(), Seconds(cpu::kSpinBudget).count());
  EXPECT_DOUBLE_EQ(spec->long_spin_budget(), Seconds(cpu::kLongSpinBudget).count());
  EXPECT_GT(spec->spin_latency(), 0);
}

}  // namespace
}  // namespace pw
