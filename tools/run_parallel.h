#pragma once
// The multi-process path of `pipeweave run` (tools/cmd_run_parallel.cc): the launcher
// (`--nproc N`) and a single rank (`--rank R --world-size N --store ...`). Also registered
// on its own as `pipeweave run-parallel`.

#include <string>
#include <vector>

#include "ir/status.h"

namespace pw::tools {

StatusOr<int> RunParallel(const std::vector<std::string>& args);

}  // namespace pw::tools
