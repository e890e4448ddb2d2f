#pragma once
// FLOPs of a module's work per pipeline stage, split the way pipeline schedules price it:
// forward (F), input-gradient backward (B) and weight-gradient backward (W). A module
// without backward ops gets B and W estimated as one forward each (every matmul's input
// and weight gradients cost what the matmul does).

#include <vector>

#include "ir/module.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pw {

struct StageFlops {
  int stage = 0;
  double forward = 0;
  double backward_input = 0;
  double backward_weight = 0;
  bool estimated_backward = false;  // no backward ops: B and W are estimates
};

// One entry per stage 0..S-1, where S is the highest stage of any op plus one. Ops of every
// program count (an unsplit module or the programs split-program made).
StatusOr<std::vector<StageFlops>> StageFlopsOf(const Module& module, const OpRegistry& registry);

// The FLOPs of one op from its definition's cost function (0 when it has none).
StatusOr<double> OpFlops(const Program& program, const Op& op, const OpRegistry& registry);

}  // namespace pw
