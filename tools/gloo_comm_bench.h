#pragma once
// The comm model's measurements (cost_model/comm_profiler.h) in rank processes as
// `pipeweave run --nproc N` starts them: the launcher, a file store, the executor on its
// CPU streams, Gloo over TCP on loopback. Every rank is this executable again running
// `pipeweave comm-bench`, which trains the plan with a clock around each communication
// (one monotonic clock for the whole machine) and reports them; the launching side pairs
// up the members of each operation.

#include <memory>

#include "cost_model/comm_profiler.h"

namespace pw::tools {

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark();

}  // namespace pw::tools
