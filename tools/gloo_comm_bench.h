#pragma once
// The comm model's measurements over the executor's Gloo communicator: every rank is a
// thread of this process with its own Gloo context over TCP on loopback, rendezvous through
// a file store in a temporary directory — the same transport and code path `pipeweave run`
// uses between rank processes.

#include <memory>

#include "cost_model/comm_profiler.h"

namespace pw::tools {

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark();

}  // namespace pw::tools
