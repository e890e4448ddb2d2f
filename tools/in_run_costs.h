#pragma once
// Op costs measured inside a training run instead of one op at a time. An op timed alone
// finds caches, the memory allocator and the kernel threads as an isolated loop leaves
// them; inside a step it finds them as the op before left them, and the small ops of a
// small model then take a fraction of their isolated time (the tiny GPT's adds 0.8 us in
// the run against 5 us alone). `profile --in-run` runs the module's plan (or, without one,
// its sequential plan) as threads of this process, times every kernel instruction of the
// steps after the first, and keeps per signature the instructions' times. Compute kernels
// run one at a time meanwhile (cpu::SerializeComputeKernels): each is timed alone on a
// core, as the simulator prices it before it shares the cores among the ranks.

#include <map>
#include <string>
#include <vector>

#include "cost_model/stale_price.h"
#include "ir/module.h"
#include "ir/status.h"

namespace pw::tools {

struct InRunOptions {
  int steps = 6;          // traced, after one untimed warm-up step
  int micro_batches = 4;  // for a module without a plan
  // BLAS threads of each rank: with 1, an instruction's time is the CPU time of its
  // stream's thread (what it costs whatever else shares the cores); else its wall time.
  int kernel_threads = 1;
};

// Seconds of every kernel instruction the run executed, by op signature key.
StatusOr<std::map<std::string, std::vector<double>>> MeasureOpsInRun(const Module& module,
                                                                     const InRunOptions& options);

// What the runs of `module`'s plan (as MeasureOpsInRun trains it) find beyond each of
// `counts`' caches, per signature (simulator/stale_bytes.h), added under its schedule.
Status CountInRunStaleBytes(const Module& module, int micro_batches, cost::StaleCounts& counts);

}  // namespace pw::tools
