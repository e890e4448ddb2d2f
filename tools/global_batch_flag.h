#pragma once
// `--global-batch G` of the training commands: samples per step, shared by the dp replicas.
// G = micro-batch size x micro-batches x dp, so each replica runs G / (dp x B) micro-batches.

#include <optional>

#include "ir/module.h"
#include "ir/status.h"
#include "tools/flags.h"

namespace pw::tools {

// Micro-batches per replica when --global-batch is given (nullopt otherwise), for `module`
// run on `replicas` replicas (its mesh's dp on rank processes, 1 for the reference runner,
// which runs the whole batch itself). Errors, one line each: --micro-batches given too, a
// module that records no micro-batch size, G not a multiple of dp x B, and a planned
// module whose schedule runs another number of micro-batches per replica.
StatusOr<std::optional<int>> ReadGlobalBatchFlag(const Flags& flags, const Module& module,
                                                 int replicas);

}  // namespace pw::tools
