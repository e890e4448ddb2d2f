#pragma once
// `--threads N` of the training commands: the threads one process computes with.

#include "ir/status.h"
#include "tools/flags.h"

namespace pw::tools {

// N when given (>= 1, else an error), otherwise the environment's or the machine's share
// for one of `local_processes` processes (executor/process_resources.h).
StatusOr<int> ReadThreadsFlag(const Flags& flags, int local_processes);

}  // namespace pw::tools
