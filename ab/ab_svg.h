#pragma once
// `pipeweave ab --svg`: the simulated timelines of plans A and B, one above the other.

#include <string>

#include "ab/ab_sim.h"

namespace pw::ab {

// One rank's simulated timeline, one lane per stream it uses, its time axis running to
// `time_scale_end` seconds (cost::SimRankLanesSvg).
StatusOr<std::string> RankTimelineSvg(const Module& module, const SimulatedPlan& plan, int rank,
                                      const std::string& title, double time_scale_end);

// One SVG document holding `top` above `bottom` (each a whole <svg> document) as nested
// <svg> elements, the second offset by the height of the first.
StatusOr<std::string> StackSvgs(const std::string& top, const std::string& bottom);

}  // namespace pw::ab
