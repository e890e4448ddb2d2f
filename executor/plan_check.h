#pragma once
// Checks a plan across all pipeline ranks before anything runs: every send has exactly one
// matching recv on its peer (same direction, micro-batch and vars) and the other way
// round, every job names a program that exists, and micro-batches are in range. A plan
// that fails would hang or corrupt a run, so it is refused with the first offending job.

#include "executor/lowering.h"
#include "ir/module.h"
#include "ir/status.h"

namespace pw {

Status CheckPlan(const Module& module);

// CheckPlan, then lowers every rank without running anything: also refuses a plan in which
// a rank reads a value no job of it produces or receives, waits on an event nothing
// records, or names an unknown stream. What a launcher runs before starting processes.
Status CheckPlanForAllRanks(const Module& module, const LoweringOptions& options);

}  // namespace pw
