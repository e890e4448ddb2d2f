#pragma once
// The op-level simulation drawn as lanes, so overlap can be seen: for each drawn rank one
// lane per stream it uses (compute, mp_comm, pp_send, pp_recv, dp_comm, mp_fwd_comm), its
// instructions as boxes at their simulated times, compute coloured by the kind of its job (F, B, I,
// W, optimizer) and communication by what it is for (mp_forward, mp_backward, pp_send, pp_recv,
// dp). Consecutive instructions of one job on a lane that are too narrow to see apart merge into
// one box (coloured by what takes most of its time), so drawings of big plans stay small and
// readable. Every box has a tooltip (<title>) naming what it holds.
//
// Each lane is a <g class="lane" data-rank="R" data-stream="S"> with its label and its
// boxes (<rect class="op">), for tools and tests that read the drawing.

#include <string>

#include "ir/module.h"
#include "simulator/simulator.h"

namespace pw::cost {

// The lanes of the first mp/dp replica of every pipeline rank, one above the other. Needs
// the timeline (SimOptions::record_timeline).
StatusOr<std::string> SimScheduleSvg(const Module& module, const SimGraph& graph,
                                     const SimResult& result, const std::string& title);

// The lanes of global rank `rank` alone. The time axis runs from 0 to `time_scale_end`
// seconds when it is > 0 (so that drawings of two plans share one scale), else to the
// step time.
StatusOr<std::string> SimRankLanesSvg(const Module& module, const SimGraph& graph,
                                      const SimResult& result, int rank, const std::string& title,
                                      double time_scale_end = 0);

}  // namespace pw::cost
