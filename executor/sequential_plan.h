#pragma once
// Makes an unplanned single-stage module runnable: its main program (forward, backward
// and optimizer ops, as `append-backward` leaves it) becomes a "train" program run once
// per micro-batch and an "optimizer" program run once per step. This is what the
// executor runs when a module has no plan (pp = 1); it adds no parallelism beyond the
// module's mp and dp.

#include <string>

#include "ir/module.h"
#include "ir/status.h"

namespace pw {

StatusOr<Module> WithSequentialPlan(const Module& module, int micro_batches);

// The schedule `module` runs with: its plan's, or "sequential" (WithSequentialPlan's)
// without one.
std::string ScheduleOf(const Module& module);

}  // namespace pw
