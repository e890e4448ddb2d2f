// How CPU streams wait: the compute stream spins briefly before it blocks, communication
// streams block at once (executor/cpu/spin_wait.h says why).
#include "executor/cpu/spin_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "executor/cpu/cpu_event.h"

namespace pw::cpu {
namespace {

using Clock = std::chrono::steady_clock;

TEST(SpinWait, BlockingAtOnceLooksOnceAndGivesUp) {
  int looks = 0;
  EXPECT_FALSE(SpinUntil([&] { return ++looks, false; }, SpinPolicy::kBlockAtOnce));
  EXPECT_EQ(looks, 1);
  EXPECT_TRUE(SpinUntil([] { return true; }, SpinPolicy::kBlockAtOnce));
}

TEST(SpinWait, SpinningFirstKeepsLookingForTheWholeBudget) {
  int looks = 0;
  const auto start = Clock::now();
  EXPECT_FALSE(SpinUntil([&] { return ++looks, false; }, SpinPolicy::kSpinFirst));
  EXPECT_GE(Clock::now() - start, kSpinBudget);
  EXPECT_GT(looks, 64);
  int until_third = 0;
  EXPECT_TRUE(SpinUntil([&] { return ++until_third == 3; }, SpinPolicy::kSpinFirst));
}

// A waiter that does not spin still wakes when the event is recorded from another thread,
// whether the record comes before or after it sleeps, and sees the poison.
TEST(SpinWait, AnEventWaitedForWithoutSpinningWakesItsWaiter) {
  for (int delay_ms : {0, 20}) {
    CpuEvent event;
    std::thread recorder([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      event.Record(/*poisoned=*/true);
    });
    event.Wait(SpinPolicy::kBlockAtOnce);
    EXPECT_TRUE(event.recorded());
    EXPECT_TRUE(event.poisoned());
    recorder.join();
  }
}

}  // namespace
}  // namespace pw::cpu
