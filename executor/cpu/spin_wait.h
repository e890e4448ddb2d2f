#pragma once
// A short, bounded spin before blocking. A hand-off between two busy streams usually
// completes within a few microseconds, far less than a futex sleep and wake-up; past the
// budget the caller blocks on a condition variable, so an idle stream never burns a core.

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

// Spins until ready() or the budget runs out; returns ready().
template <typename Ready>
bool SpinUntil(Ready ready) {
  if (ready()) return true;
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
