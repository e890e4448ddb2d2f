#pragma once
// Whether a CPU cost table was measured for the run to predict: at the kernel thread count
// it will use (ops on two threads take about half as long as on one, so a table profiled
// for another count predicts another run), and in runs of its schedule.

#include <string>

#include "cost_model/op_cost_table.h"
#include "ir/status.h"

namespace pw::tools {

// The threads each of `processes` local training processes computes with (1 process: the
// reference runner): `requested` when > 0, else what `pipeweave run` picks.
int RunThreads(int requested, int processes);

// Refuses, in one line saying what to do, a CPU table profiled at another count than
// RunThreads(requested, processes); tables of other devices, or without a count, pass.
Status CheckProfiledThreads(const cost::OpCostTable& table, int processes, int requested);

// A line for a plan of `schedule` priced with a CPU table whose in-run costs were measured
// in runs of other schedules only (on a CPU a schedule's order of jobs moves what its ops
// cost), saying how its order is priced (the table's price of memory beyond a cache, or
// nothing) and how to measure its own; empty where there is nothing to say.
std::string OtherScheduleNote(const cost::OpCostTable& table, const std::string& schedule);

}  // namespace pw::tools
