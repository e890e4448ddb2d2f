#pragma once
// The op-level simulation drawn like the pipeline papers' figures, with the planning
// issue's drawing (cost_model/schedule_svg.h): one row per pipeline rank, each job a block
// spanning its ops' simulated times (the first mp/dp replica of the pipeline rank).

#include <string>

#include "cost_model/simulator.h"
#include "ir/module.h"

namespace pw::cost {

// Needs the timeline (SimOptions::record_timeline).
StatusOr<std::string> SimScheduleSvg(const Module& module, const SimGraph& graph,
                                     const SimResult& result, const std::string& title);

}  // namespace pw::cost
