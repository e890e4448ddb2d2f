#pragma once
// A short, bounded spin before blocking. A hand-off between two busy streams usually
// completes within a few microseconds, far less than a futex sleep and wake-up; past the
// budget the caller blocks on a condition variable, so an idle stream never burns a core.
//
// Pipeline transfer streams do not spin (`SpinPolicy`): they mostly wait for compute work
// that takes far longer than the budget, and on a shared core their spin's yields cost
// more than the spin saves. Linux's EEVDF scheduler moves a yielding thread's
// deadline a slice later, so when the event comes the thread is still queued behind the
// compute thread it yielded to, until that thread's slice ends: on this project's 2-core
// VMs a pipeline send started ~1 ms after its tensor was ready, in most steps.

#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pw::cpu {

inline constexpr std::chrono::microseconds kSpinBudget{20};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

enum class SpinPolicy { kSpinFirst, kBlockAtOnce };

// Spins until ready() or the budget runs out; returns ready(). kBlockAtOnce: checks once.
template <typename Ready>
bool SpinUntil(Ready ready, SpinPolicy policy = SpinPolicy::kSpinFirst) {
  if (ready()) return true;
  if (policy == SpinPolicy::kBlockAtOnce) return false;
  auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (int i = 1;; ++i) {
    CpuRelax();
    if (ready()) return true;
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();  // let the thread we wait for run on a busy core
    }
  }
}

}  // namespace pw::cpu
