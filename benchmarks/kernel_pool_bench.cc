// What handing work to the kernel threads costs (ops/kernels/cpu/parallel_for.h): an
// element-wise loop (y = a + b over N floats) on the calling thread alone, then cut in two
// ranges for the caller and one pool thread, both when the pool thread has just finished
// the previous loop (still spinning, as after a GEMM cut across the threads) and when it has
// gone to sleep (the loop follows work on the caller alone: a small GEMM, the executor's
// bookkeeping). Wall time of the loop; a cut pays where it beats the one-thread figure.
// On a VM whose idle vCPUs halt, waking the sleeping thread costs tens of microseconds.
// The last mode is what a kernel gets: ParallelFor with the cheap maps' grain after the
// pool fell asleep, cutting only where the range is worth the wake (kAsleepGrainFactor).
//
//   build/benchmarks/kernel_pool_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "ops/kernel.h"
#include "ops/kernels/cpu/parallel_for.h"

namespace pw::ops::cpu {
namespace {

using Clock = std::chrono::steady_clock;

// Longer than the pool threads' spin (20 us), so that they sleep before the loop.
constexpr std::chrono::microseconds kIdle{300};

struct Loop {
  explicit Loop(int64_t n) : a(n, 1.f), b(n, 2.f), y(n) {}
  static void Add(void* self, int64_t begin, int64_t end) {
    Loop& l = *static_cast<Loop*>(self);
    for (int64_t i = begin; i < end; ++i) l.y[i] = l.a[i] + l.b[i];
  }
  int64_t n() const { return static_cast<int64_t>(y.size()); }
  // `parts` ranges whatever the pool's state (0: as ParallelFor would cut at kCheapGrain).
  void Run(int parts) {
    if (parts == 0)
      ParallelFor(n(), kCheapGrain, [&](int64_t begin, int64_t end) { Add(this, begin, end); });
    else if (parts == 1)
      Add(this, 0, n());
    else
      RunRanges(n(), parts, &Add, this);
    benchmark::DoNotOptimize(y.data());
  }
  std::vector<float> a, b, y;
};

void BusyWait(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

// range(0): N floats; range(1): 0 = one thread, 1 = cut in two, pool still spinning,
// 2 = cut in two, pool asleep, 3 = ParallelFor's choice, pool asleep.
void BM_AddLoop(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(1));
  SetKernelThreads(mode == 0 ? 1 : 2);
  Loop loop(state.range(0));
  const int parts = mode == 0 ? 1 : mode == 3 ? 0 : 2;
  loop.Run(2);  // starts the pool thread
  for (auto _ : state) {
    if (mode == 1) loop.Run(2);  // the previous loop: the pool thread is awake after it
    if (mode >= 2) BusyWait(kIdle);
    const auto start = Clock::now();
    loop.Run(parts);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
  static const char* kModes[] = {"one thread", "two, pool spinning", "two, pool asleep",
                                 "ParallelFor, pool asleep"};
  state.SetLabel(kModes[mode]);
  SetKernelThreads(1);
}
BENCHMARK(BM_AddLoop)
    ->ArgsProduct({{1 << 13, 1 << 15, 1 << 17, 1 << 19}, {0, 1, 2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pw::ops::cpu

BENCHMARK_MAIN();
