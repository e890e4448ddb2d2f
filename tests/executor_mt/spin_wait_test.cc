// How CPU streams wait: compute and collective streams spin before they block (long
// enough to catch their events where their waits are short), pipeline transfer streams
// block at once (executor/cpu/spin_wait.h says why).
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

TEST(SpinWait, AStreamWhoseWaitsEndSoonSpinsLongEnoughToCatchThem) {
  using std::chrono::microseconds;
  AdaptiveSpin spin(SpinPolicy::kSpinFirst, StreamSpin::kAdaptive);
  EXPECT_EQ(spin.budget(), kSpinBudget);  // nothing learnt yet: the short spin
  for (int k = 0; k < SpinHistory::kShortNeeded - 1; ++k) spin.Observe(microseconds(60));
  EXPECT_EQ(spin.budget(), kSpinBudget);
  spin.Observe(microseconds(60));  // six of the last eight within the long budget
  EXPECT_EQ(spin.budget(), kLongSpinBudget);
  spin.Observe(kLongSpinBudget);  // at the budget still counts as caught
  EXPECT_EQ(spin.budget(), kLongSpinBudget);
  // Long waits (a pipeline bubble, a long kernel on the other stream): back to the short
  // spin once fewer than six of the last eight were short (seven short ones, then three).
  for (int k = 0; k < 2; ++k) {
    spin.Observe(microseconds(5000));
    EXPECT_EQ(spin.budget(), kLongSpinBudget);
  }
  spin.Observe(microseconds(5000));
  EXPECT_EQ(spin.budget(), kSpinBudget);
  AdaptiveSpin blocking(SpinPolicy::kBlockAtOnce, StreamSpin::kAdaptive);
  for (int k = 0; k < 8; ++k) blocking.Observe(microseconds(1));
  EXPECT_EQ(blocking.budget(), std::chrono::nanoseconds::zero());
}

// PW_STREAM_SPIN=short keeps the brief spin whatever the waits, block never spins.
TEST(SpinWait, TheProcessSettingOverridesWhatTheWaitsTeach) {
  AdaptiveSpin brief(SpinPolicy::kSpinFirst, StreamSpin::kShort);
  AdaptiveSpin never(SpinPolicy::kSpinFirst, StreamSpin::kBlock);
  for (int k = 0; k < 8; ++k) {
    brief.Observe(std::chrono::microseconds(50));
    never.Observe(std::chrono::microseconds(50));
  }
  EXPECT_EQ(brief.budget(), kSpinBudget);
  EXPECT_EQ(never.budget(), std::chrono::nanoseconds::zero());
}

TEST(SpinWait, AnEventRecordedWithinTheSpinIsCaughtWithoutSleeping) {
  CpuEvent event;
  std::thread recorder([&] {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    event.Record();
  });
  // The waiter spins for up to a second: it returns once the event is recorded, and
  // never sleeps on the condition variable (the recorder would have had to notify it).
  const auto start = Clock::now();
  event.Wait(std::chrono::seconds(1));
  EXPECT_TRUE(event.recorded());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  recorder.join();
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
