#pragma once
// The comm model's measurements (cost_model/comm_profiler.h) in rank processes as
// `pipeweave run --nproc N` starts them: the launcher, a file store, the executor on its
// CPU streams, Gloo over TCP on loopback. Every rank is this executable again running
// `pipeweave comm-bench`, which trains the plan with a clock around each communication
// (one monotonic clock for the whole machine) and reports them; the launching side pairs
// up the members of each operation.

#include <memory>
#include <string>
#include <vector>

#include "cost_model/comm_profiler.h"

namespace pw::tools {

// Where the measuring run's ranks start. By default on this machine, meeting in a file
// store; with a Redis `store` and a `rank_prefix` (executor/launcher.h), on other hosts
// (e.g. the test bed's, so that the link between them is what gets measured). Each run
// meets under its own key prefix of the store.
struct CommBenchPlacement {
  std::string store;                     // "redis://HOST:PORT"; empty: a file store
  std::vector<std::string> rank_prefix;  // before each rank's command line
};

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark(CommBenchPlacement placement = {});

}  // namespace pw::tools
