#pragma once
// Measures what the runtimes add to every op besides its kernel — the executor's dispatch,
// slot bookkeeping and events, and the sequential reference runner's scope lookups — on a
// tiny GPT whose kernels take a few microseconds: the executor's step time minus the
// simulated sum of its profiled kernels, divided by its op count; the reference runner's
// as the executor's plus what its step takes beyond the executor's (less the gradient
// additions it runs on top), per op. The figures go into the CPU DeviceSpec (op_overhead,
// reference_op_overhead).

#include "cost_model/op_cost_table.h"
#include "cost_model/profiler.h"
#include "ir/module.h"

namespace pw::tools {

struct RuntimeOverheads {
  double executor = 0;  // seconds per op
  double reference = 0;
  // What they were derived from: the tiny GPT's op count and step times.
  double ops = 0;
  double kernels_ms = 0;
  double executor_ms = 0;
  double reference_ms = 0;
};

StatusOr<RuntimeOverheads> CalibrateRuntimes(const cost::ProfileOptions& options);

// The reference runner's overhead per op measured on `module` itself (unplanned; its
// sequential plan of `micro_batches`, on `threads` kernel threads): the reference's step is
// the measured ratio of its runs to the executor's (rounds of both alternated, the median)
// times the executor's step as sim prices it with `table` (`executor_overhead` per op); the
// overhead is what that leaves beyond its kernels, per op. The tiny GPT's ops take ~1 us, and
// what the reference adds grows with an op's size (the small GPT's reference runs stepped
// 11.1-11.6 ms where the tiny GPT's figure priced them at 9.7-10.9).
struct ReferenceCalibration {
  double reference = 0;  // seconds per op
  // What it was derived from: the reference's op count, the median step of each runtime,
  // the median of the rounds' ratios, the rounds and the timed steps of each runtime.
  double ops = 0;
  double executor_ms = 0;
  double reference_ms = 0;
  double ratio = 0;
  int rounds = 0;
  int steps = 0;
};
StatusOr<ReferenceCalibration> CalibrateReferenceOn(const Module& module, int micro_batches,
                                                    int threads, const cost::OpCostTable& table,
                                                    double executor_overhead);

// The CPU one wait for another stream's event costs the executor's stream threads while
// every core is busy (DeviceSpec.wait_cpu): two threads hand turns back and forth through
// its CPU events (spinning first, as compute and collective streams do), a few
// microseconds of work a turn, beside one busy thread per core; their CPU time beyond the
// work, per wait. Seconds.
double MeasureWaitCpu(int cores, int turns = 40);

}  // namespace pw::tools
