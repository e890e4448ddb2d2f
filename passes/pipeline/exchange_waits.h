#pragma once
// Blocking exchanges in a lowered plan. By default a rank's next job waits only for the
// transfers it reads (a received activation); its sends finish in the background. Megatron's
// schedules wait on every request of a batch_isend_irecv before their next compute, and
// DeepSpeed's pipeline engine sends and receives in its instruction stream: there the next
// job starts only once every transfer of the exchange before it is done. WaitForExchanges
// writes that into the plan as events: each send/recv job of an exchange (the run of them
// between two compute jobs of a rank) records one, and the rank's next job waits on all of
// them before its first op on each stream (every part of a fused or split job). Events only
// order work: results are the same bits.

#include "ir/plan.h"

namespace pw::pipeline {

// Returns how many exchanges (runs of send/recv jobs followed by a job that runs a program)
// now hold the job after them.
int WaitForExchanges(Plan& plan);

// Whether any job of the plan, at any level, carries events of its own (which a pass that
// rebuilds the plan's jobs from its actions would drop).
bool HasJobEvents(const Plan& plan);

}  // namespace pw::pipeline
