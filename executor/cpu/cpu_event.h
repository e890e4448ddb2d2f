#pragma once
// A CPU event: a completion flag. Record() sets it; Wait() returns once it is set,
// spinning briefly (as the policy says) and then sleeping on a condition variable. An event
// recorded by work that failed (or was skipped because its inputs failed) is poisoned: its waiters
// skip their work too, so a failure is reported once, where it happened.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "executor/backend.h"
#include "executor/cpu/spin_wait.h"

namespace pw::cpu {

class CpuEvent final : public Event {
 public:
  void Record(bool poisoned = false);
  void Wait(SpinPolicy policy = SpinPolicy::kSpinFirst);
  // Spins for up to `spin`, then sleeps; whether the spin saw it recorded (no sleep).
  bool Wait(std::chrono::nanoseconds spin);
  bool recorded() const { return done_.load(std::memory_order_acquire); }
  bool poisoned() const { return poisoned_.load(std::memory_order_relaxed); }  // after Wait
  void Reset() override {
    done_.store(false, std::memory_order_relaxed);
    poisoned_.store(false, std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> done_{false};
  std::atomic<bool> poisoned_{false};  // published by the release store of done_
  std::atomic<int> sleepers_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace pw::cpu
