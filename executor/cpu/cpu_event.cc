#include "executor/cpu/cpu_event.h"

namespace pw::cpu {

// Record and Wait use sequentially consistent operations on done_ and sleepers_: either
// the recorder sees the sleeper and notifies under the mutex, or the sleeper's check under
// the mutex sees the flag. No wake-up is lost.
void CpuEvent::Record(bool poisoned) {
  poisoned_.store(poisoned, std::memory_order_relaxed);
  done_.store(true, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

void CpuEvent::Wait(SpinPolicy policy) {
  Wait(policy == SpinPolicy::kBlockAtOnce ? std::chrono::nanoseconds::zero()
                                          : std::chrono::nanoseconds(kSpinBudget));
}

bool CpuEvent::Wait(std::chrono::nanoseconds spin) {
  if (SpinUntil([this] { return recorded(); }, spin)) return true;
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_.load(std::memory_order_seq_cst); });
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  return false;
}

}  // namespace pw::cpu
