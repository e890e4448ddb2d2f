#pragma once
// The comm model's measurements over the executor's Gloo communicator, in rank processes
// as `pipeweave run --nproc N` starts them (the launcher, a file store, TCP on loopback):
// every rank is this executable again running `pipeweave comm-bench-rank`, which computes
// for the run's compute gap before every operation and reports when each operation
// started and ended (one monotonic clock for the whole machine) and the CPU its process
// spent besides computing. The launching side pairs up the members of each operation.

#include <memory>

#include "cost_model/comm_profiler.h"

namespace pw::tools {

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark();

}  // namespace pw::tools
