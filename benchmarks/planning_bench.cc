// Pipeline planning figures: generate + insert-p2p + check + timed simulate for 1F1B and
// GPipe at growing sizes (time per action should stay flat), zb-auto's search, and the
// peak heap per action at the largest size.
//
//   build-plan/benchmarks/planning_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
// The heap keeps the memory an iteration frees (see KeepFreedMemory); set
// PW_BENCH_DEFAULT_MALLOC=1 to measure with glibc's defaults instead.
//
// Lowering and checking use every core for large schedules (ir/parallel.h), so times are
// wall-clock ("Time", and time_per_action) and "CPU" is the whole process's CPU time. The
// last argument caps the threads: 0 uses every core, 1 only the calling thread (the
// algorithm alone, for the linear-scaling series).

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "ir/parallel.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "passes/pipeline/schedule_generators.h"
#include "simulator/action_simulator.h"

// Live and peak heap bytes, so that a benchmark can report its peak memory per action.
namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};
void Track(int64_t delta) {
  int64_t now = g_live.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n);
  if (!p) throw std::bad_alloc();
  Track(static_cast<int64_t>(malloc_usable_size(p)));
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  Track(-static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace {
// By default glibc gives freed memory back to the kernel: blocks of 128 KiB and more are
// unmapped, and a free heap top beyond a threshold is trimmed. An iteration here frees
// tens of megabytes of schedules and tables, so the next one would fault them back in
// page by page, which on a VM costs about as much as the planning itself. Keeping freed
// memory in the process makes the iterations measure the planning code rather than the
// kernel mapping and zeroing pages.
void KeepFreedMemory() {
  if (const char* v = std::getenv("PW_BENCH_DEFAULT_MALLOC"); v && *v == '1') return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: larger blocks still get mmap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}
}  // namespace

namespace pw::pipeline {
namespace {

// The whole planning path once; returns the number of actions planned.
size_t PlanOnce(ScheduleKind kind, int ranks, int micro_batches) {
  ScheduleSpec spec;
  spec.kind = kind;
  spec.num_ranks = spec.num_stages = ranks;
  spec.num_micro_batches = micro_batches;
  StatusOr<ActionSchedule> compute = GenerateSchedule(spec);
  StatusOr<ActionSchedule> lowered = InsertP2P(*compute, {P2POrder::kNaive});
  // Structure and memory checks, then one replay that proves deadlock freedom and times it.
  StatusOr<TimedResult> timed = CheckAndSimulate(*lowered, CheckOptions{}, SimulationOptions{});
  if (!timed.ok()) std::abort();
  benchmark::DoNotOptimize(timed->makespan);
  return lowered->num_actions();
}

void RunPlanning(benchmark::State& state, ScheduleKind kind) {
  const int ranks = static_cast<int>(state.range(0));
  const int mbs = static_cast<int>(state.range(1));
  SetMaxThreads(static_cast<size_t>(state.range(2)));
  size_t actions = 0;
  int64_t peak = 0;
  for (auto _ : state) {
    int64_t before = g_live.load();
    g_peak.store(before);
    actions = PlanOnce(kind, ranks, mbs);
    peak = std::max(peak, g_peak.load() - before);
  }
  state.counters["actions"] = static_cast<double>(actions);
  // Seconds per action (printed with SI prefixes: "9.5n" is 9.5 ns).
  state.counters["time_per_action"] = benchmark::Counter(
      static_cast<double>(actions),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["peak_bytes_per_action"] = static_cast<double>(peak) / actions;
  SetMaxThreads(0);
}

void BM_Plan1F1B(benchmark::State& state) { RunPlanning(state, ScheduleKind::k1F1B); }
void BM_PlanFThenB(benchmark::State& state) { RunPlanning(state, ScheduleKind::kFThenB); }

// The figures: 32 x 1,024 <= 3 ms and 64 x 4,096 <= 15 ms.
BENCHMARK(BM_Plan1F1B)
    ->ArgNames({"ranks", "mbs", "threads"})
    ->Args({32, 1024, 0})
    ->Args({64, 4096, 0})
    ->Args({32, 1024, 1})
    ->Args({64, 4096, 1})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
// Linear scaling on one thread, 10^3 .. 10^7 actions (about 6 actions per (stage,
// micro-batch)), ending at the figure: 128 x 16,384 <= 1 s, which is also timed on every core.
BENCHMARK(BM_PlanFThenB)
    ->ArgNames({"ranks", "mbs", "threads"})
    ->Args({4, 40, 1})
    ->Args({8, 256, 1})
    ->Args({16, 1024, 1})
    ->Args({32, 4096, 1})
    ->Args({64, 8192, 1})
    ->Args({128, 16384, 1})
    ->Args({128, 16384, 0})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

// zb-auto's search at P = 32, M = 256: <= 10 ms, with unit costs and with the paper's
// costs at memory p and 2p. Repeated, so that they print medians (CPU: the process's time,
// the figure on a loaded machine).
void BM_ZbAuto(benchmark::State& state) {
  ScheduleSpec spec;
  spec.kind = ScheduleKind::kZbAuto;
  spec.num_ranks = spec.num_stages = static_cast<int>(state.range(0));
  spec.num_micro_batches = static_cast<int>(state.range(1));
  for (auto _ : state) {
    StatusOr<ActionSchedule> s = GenerateSchedule(spec);
    if (!s.ok()) std::abort();
    benchmark::DoNotOptimize(s->ranks.data());
  }
}
BENCHMARK(BM_ZbAuto)
    ->Args({32, 256})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(9)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);

// The same with the Zero Bubble paper's measured costs for P = 32, M = 256 (its Table 9,
// 28.3B model) at memory limits p and 2p (its ZB-1p and ZB-2p).
void BM_ZbAutoPaperCosts(benchmark::State& state) {
  ScheduleSpec spec;
  spec.kind = ScheduleKind::kZbAuto;
  spec.num_ranks = spec.num_stages = 32;
  spec.num_micro_batches = 256;
  spec.costs.forward = 10.402;
  spec.costs.backward = 10.248;
  spec.costs.weight = 7.698;
  spec.costs.comm = 0.460;
  spec.mem_limit = static_cast<double>(state.range(0)) * spec.num_ranks;
  for (auto _ : state) {
    StatusOr<ActionSchedule> s = GenerateSchedule(spec);
    if (!s.ok()) std::abort();
    benchmark::DoNotOptimize(s->ranks.data());
  }
}
BENCHMARK(BM_ZbAutoPaperCosts)
    ->ArgName("mem_p")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(9)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pw::pipeline

int main(int argc, char** argv) {
  KeepFreedMemory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
