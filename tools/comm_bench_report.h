#pragma once
// What `pipeweave comm-bench`'s rank processes report, paired up across ranks into the
// measured operations the comm model fits (cost_model/comm_profiler.h). Each rank reports,
// once measuring started, one line per operation it took part in:
//   a STREAM GROUP SEQ BYTES ARRIVED DONE   an all-reduce (SEQ counts the stream's
//                                           all-reduces over GROUP from the first step);
//                                           g and x the same for an all-gather and a
//                                           reduce-scatter (BYTES: the whole buffer)
//   s PEER TAG BYTES POSTED                 a send
//   r PEER TAG BYTES POSTED DONE            a recv
// then "t SECONDS" for each measured step, in order (its time on that rank), "w WAITS
// CPU_SECONDS SHARED_WAITS SHARED_CPU_SECONDS SHARED_SECONDS": the waits for another
// stream's event its threads ended spinning in those steps and their CPU time, and of those
// whose thread shared its core, their count, CPU time and time (executor/cpu/caught_spins.h),
// and last "c CPU_SECONDS STEPS":
// its process's CPU time over the STEPS measured steps.
// Times are seconds on one clock for the whole machine.

#include <string>
#include <vector>

#include "cost_model/comm_profiler.h"
#include "ir/module.h"
#include "ir/status.h"

namespace pw::tools {

// The operations of `lines` (one list per rank), each with its members' times put
// together: a collective from its last member's arrival to its members' mean completion,
// a transfer from the later of its send and receive to the receive's completion. A tag
// comes again in every step: the k-th send with a tag meets the k-th receive with it. A
// step's time is its slowest rank's.
StatusOr<cost::CommRunResult> PairCommReports(const Mesh& mesh,
                                              const std::vector<std::vector<std::string>>& lines);

}  // namespace pw::tools
