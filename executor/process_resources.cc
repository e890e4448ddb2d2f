#include "executor/process_resources.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace pw {
namespace {

// A positive thread count from an environment variable, or 0.
int FromEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return 0;
  char* end = nullptr;
  long n = std::strtol(value, &end, 10);
  return end != value && *end == '\0' && n > 0 && n <= 4096 ? static_cast<int>(n) : 0;
}

}  // namespace

int ComputeThreads(int requested, int local_processes) {
  if (requested > 0) return requested;
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (int n = FromEnv(name); n > 0) return n;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_processes));
}

void KeepFreedBlocksInHeap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: larger blocks still get mmap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void KeepFreedMemory() {
  KeepFreedBlocksInHeap();
  // One arena for every thread: a stream thread's own arena lives in 64 MiB heaps that
  // glibc unmaps whole once they are free, whatever the trim threshold, so a rank's
  // per-micro-batch tensors were faulted in again on every micro-batch. Tensors are few
  // and large, so the shared arena's lock is not contended.
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace pw
