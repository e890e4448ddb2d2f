#pragma once
// How `pipeweave sim` prints a simulation: a table for people, JSON for scripts, and the
// coverage (the share of estimated time from each estimate path).

#include <string>

#include "simulator/memory_fit.h"
#include "simulator/simulator.h"

namespace pw::cost {

// {"step_time_ms", "bubble_rate", "exposed_comm_ms": EXPOSED, "busy_ms_by_stream": BUSY,
//  ["cpu_ms_per_step": on CPU devices, the core time a step's threads use over all ranks],
//  "world_size", "micro_batches", "coverage": {"table": share, ...},
//  "ranks": [{"rank", "peak_bytes", "persistent_bytes", "compute_busy_ms",
//             "exposed_comm_ms": EXPOSED, "bubble_ms", "busy_ms": {"compute": ..., ...},
//             "busy_ms_by_stream": BUSY}]}
// EXPOSED: {"mp_forward", "mp_backward", "pp_send", "pp_recv", "dp", "total"}, the time
// communication of each kind runs while none of the rank's compute does, on whatever stream
// (total: of all kinds together; the kinds may overlap, so they can add up to more).
// BUSY: {"compute", "mp_comm", "pp_send", "pp_recv", "dp_comm", "mp_fwd_comm"}, the time each
// stream runs work. Every key is always there (0 when none). At the top level each key is the
// largest over the ranks (keys may come from different ranks). busy_ms keeps only the streams the
// rank uses.
// With `fit`: "fits" (bool), "memory_capacity_bytes" and "memory_summary" at the top, and
// per rank "fits" and "memory_need_bytes" (its peak and the runtime's reservation; on a
// shared node, the node's); the table gets the summary line and a column per rank.
std::string SimResultToJson(const SimResult& result, const SimGraph& graph,
                            const MemoryFit* fit = nullptr);
std::string SimResultToTable(const SimResult& result, const SimGraph& graph,
                             const MemoryFit* fit = nullptr);
std::string CoverageTable(const SimResult& result);

}  // namespace pw::cost
