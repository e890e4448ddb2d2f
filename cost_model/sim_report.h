#pragma once
// How `pipeweave sim` prints a simulation: a table for people, JSON for scripts, and the
// coverage (the share of estimated time from each estimate path).

#include <string>

#include "cost_model/simulator.h"

namespace pw::cost {

// {"step_time_ms", "bubble_rate", "exposed_comm_ms", "world_size", "micro_batches",
//  "coverage": {"table": share, ...}, "ranks": [{"rank", "peak_bytes", "persistent_bytes",
//  "compute_busy_ms", "exposed_comm_ms", "bubble_ms", "busy_ms": {"compute": ..., ...}}]}
// Streams a rank never uses are left out of its busy_ms.
std::string SimResultToJson(const SimResult& result, const SimGraph& graph);
std::string SimResultToTable(const SimResult& result, const SimGraph& graph);
std::string CoverageTable(const SimResult& result);

}  // namespace pw::cost
