#pragma once
// Whether a CPU cost table was measured at the kernel thread count a run will use: ops on
// two threads take about half as long as on one, so a table profiled for another count
// predicts another run.

#include "cost_model/op_cost_table.h"
#include "ir/status.h"

namespace pw::tools {

// The threads each of `processes` local training processes computes with (1 process: the
// reference runner): `requested` when > 0, else what `pipeweave run` picks.
int RunThreads(int requested, int processes);

// Refuses, in one line saying what to do, a CPU table profiled at another count than
// RunThreads(requested, processes); tables of other devices, or without a count, pass.
Status CheckProfiledThreads(const cost::OpCostTable& table, int processes, int requested);

}  // namespace pw::tools
