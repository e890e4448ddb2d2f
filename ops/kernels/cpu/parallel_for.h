#pragma once
// Element-wise loops on the process's kernel threads (SetKernelThreads, ops/kernel.h).
//
// ParallelFor(n, grain, body) cuts [0, n) into at most one contiguous range per thread,
// none shorter than `grain` (fewer ranges when n is small), and runs body(begin, end) on
// each: the calling thread and the pool's threads claim ranges until none is left, so a
// pool thread that the scheduler wakes late costs nothing but its share.
//
// A pool thread spins for a moment after a loop, then sleeps. Handing a range to a spinning
// thread costs about a microsecond; waking a sleeping one costs the caller a system call and
// the range a late start (together ~40 us on a VM whose idle vCPUs halt: an add over 128K
// floats took 78-92 us cut in two against 66 on one thread, benchmarks/kernel_pool_bench). So
// while the pool sleeps a range must hold kAsleepGrainFactor x `grain`. Kernels cut only
// where no element's result depends on the cut (element-wise maps, the rows of a row-wise
// op, the columns of a column sum, whose rows are still added in order), so every thread
// count gives the same bits as one.
//
// One loop runs on the pool at a time; a loop started meanwhile (another stream's kernel)
// runs on its caller alone, with the same result.

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace pw::ops::cpu {

using RangeFn = void (*)(void* body, int64_t begin, int64_t end);

// Runs `fn(body, ...)` over `parts` equal ranges of [0, n).
void RunRanges(int64_t n, int parts, RangeFn fn, void* body);
// The number of threads a loop may use (the caller included); set by SetKernelThreads.
int KernelThreads();
// The ranges ParallelFor cuts [0, n) into: at most KernelThreads(), none shorter than
// `grain`, or kAsleepGrainFactor x `grain` while a pool thread sleeps.
int RangesFor(int64_t n, int64_t grain);
// Whether cuts heed the pool's sleep (the default). Tests that must see every cut a grain
// allows, whatever the moment, turn it off.
void SetWakeAwareCuts(bool on);
void SetPoolThreads(int threads);

// How much longer a range must be to be worth waking a sleeping pool thread.
inline constexpr int64_t kAsleepGrainFactor = 4;

template <typename Body>
void ParallelFor(int64_t n, int64_t grain, Body&& body) {
  const int parts = RangesFor(n, grain);
  if (parts == 1) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  using B = std::remove_reference_t<Body>;
  RunRanges(
      n, parts, [](void* b, int64_t begin, int64_t end) { (*static_cast<B*>(b))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// Grains, in elements, below which a range does not pay for waking a thread: a cheap map
// (add, scale) and one with a few dozen operations per element (gelu, exp).
inline constexpr int64_t kCheapGrain = 1 << 15;
inline constexpr int64_t kCostlyGrain = 1 << 13;

// Multiply-adds below which a range of GEMM-like work (products of small matrices, an
// attention head) does not pay for waking a thread (~20 us on one core).
inline constexpr int64_t kMinRangeMacs = int64_t{1} << 20;

// Items per range for work of `macs_per_item` multiply-adds an item, so that a range holds
// at least kMinRangeMacs.
inline int64_t MacGrain(int64_t macs_per_item) {
  return macs_per_item > 0
             ? std::max<int64_t>(1, (kMinRangeMacs + macs_per_item - 1) / macs_per_item)
             : 1;
}

// Rows of `width` elements per range for a row-wise op, so that a range holds about `grain`
// elements.
inline int64_t RowGrain(int64_t width, int64_t grain = kCheapGrain) {
  return width > 0 ? std::max<int64_t>(1, grain / width) : 1;
}

}  // namespace pw::ops::cpu
