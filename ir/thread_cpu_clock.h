#pragma once
// The CPU time the calling thread has spent: its own work, whatever else shares the cores
// (other processes, this process's other threads). Readings of one thread subtract.

#include <time.h>

#include <cstdint>

namespace pw {

inline int64_t ThreadCpuNanos() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

inline double ThreadCpuSeconds() { return static_cast<double>(ThreadCpuNanos()) * 1e-9; }

}  // namespace pw
