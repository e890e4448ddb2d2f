#pragma once
// Measures what the runtimes add to every op besides its kernel — the executor's dispatch,
// slot bookkeeping and events, and the sequential reference runner's scope lookups — on a
// tiny GPT whose kernels take a few microseconds: the executor's step time minus the
// simulated sum of its profiled kernels, divided by its op count; the reference runner's
// as the executor's plus what its step takes beyond the executor's (less the gradient
// additions it runs on top), per op. The figures go into the CPU DeviceSpec (op_overhead,
// reference_op_overhead).

#include "cost_model/profiler.h"

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

// The CPU one wait for another stream's event costs the executor's stream threads while
// every core is busy (DeviceSpec.wait_cpu): two threads hand turns back and forth through
// its CPU events (spinning first, as compute and collective streams do), a few
// microseconds of work a turn, beside one busy thread per core; their CPU time beyond the
// work, per wait. Seconds.
double MeasureWaitCpu(int cores, int turns = 40);

}  // namespace pw::tools
