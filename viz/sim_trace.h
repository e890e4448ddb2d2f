#pragma once
// The op-level simulation as a Chrome trace (Perfetto, chrome://tracing): one process per
// rank, one track per stream it uses, a complete event per instruction (its job and
// micro-batch in the args) and a flow arrow from every send to its recv.

#include <string>

#include "simulator/simulator.h"

namespace pw::cost {

// Needs the timeline (SimOptions::record_timeline).
std::string SimTraceJson(const SimGraph& graph, const SimResult& result);

}  // namespace pw::cost
