#include "ir/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace pw {

namespace {

// About half a millisecond of planning: thread start-up stays within a few percent.
constexpr size_t kMinParallelWork = size_t{1} << 16;

std::atomic<size_t> g_max_threads{0};

// The cores to use: SetMaxThreads's cap, else PW_THREADS, else the machine's.
size_t Cores() {
  static const size_t machine = [] {
    size_t n = std::max(1u, std::thread::hardware_concurrency());
    if (const char* v = std::getenv("PW_THREADS"); v && std::atoi(v) > 0)
      n = static_cast<size_t>(std::atoi(v));
    return n;
  }();
  const size_t cap = g_max_threads.load(std::memory_order_relaxed);
  return cap > 0 ? cap : machine;
}

// Whether `work` elementary steps pay for another thread.
bool WorthParallel(size_t work) { return work >= kMinParallelWork && Cores() > 1; }

}  // namespace

void SetMaxThreads(size_t n) { g_max_threads.store(n, std::memory_order_relaxed); }

void RunConcurrently(size_t work, const std::function<void()>& first,
                     const std::function<void()>& second) {
  if (!WorthParallel(work)) {
    first();
    second();
    return;
  }
  std::thread helper(second);
  first();
  helper.join();
}

void ParallelFor(size_t n, size_t work, const std::function<void(size_t, size_t)>& fn) {
  const size_t parts = WorthParallel(work) ? std::min(Cores(), n) : 1;
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> helpers;
  helpers.reserve(parts - 1);
  for (size_t p = 1; p < parts; ++p) helpers.emplace_back(fn, n * p / parts, n * (p + 1) / parts);
  fn(0, n / parts);
  for (std::thread& t : helpers) t.join();
}

}  // namespace pw
