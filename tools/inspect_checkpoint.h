#pragma once
// `pipeweave inspect DIR` for a checkpoint (or a folder of them: its latest): the step,
// the run and layout that wrote it, each rank's file with its size and verified checksum,
// and with --vars how every var is cut over the ranks.

#include <string>

#include "ir/status.h"

namespace pw::tools {

StatusOr<int> InspectCheckpoint(const std::string& path, bool list_vars);

}  // namespace pw::tools
