#pragma once
// The CPU time the calling thread has spent: its own work, whatever else shares the cores
// (other processes, this process's other threads). Readings of one thread subtract.

#include <time.h>

#include <algorithm>
#include <cstdint>

namespace pw {

inline int64_t ThreadCpuNanos() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

inline double ThreadCpuSeconds() { return static_cast<double>(ThreadCpuNanos()) * 1e-9; }

// The CPU time all threads of the process have spent.
inline double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// What the clock costs itself: the interval between two readings holds about one reading
// (a system call where the vDSO does not serve this clock, as on the VMs here: ~0.35 us),
// which a kernel of a microsecond or two must not be charged. The least difference of
// back-to-back readings, measured once per process.
inline int64_t ThreadCpuClockCostNanos() {
  static const int64_t cost = [] {
    int64_t least = INT64_MAX;
    for (int i = 0; i < 64; ++i) {
      const int64_t a = ThreadCpuNanos();
      least = std::min(least, ThreadCpuNanos() - a);
    }
    return least;
  }();
  return cost;
}

}  // namespace pw
