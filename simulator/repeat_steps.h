#pragma once
// Training steps back to back, as `pipeweave run` runs them. Each rank's host waits for its
// own streams at the end of a step and then issues the next one; nothing else holds a rank
// back: no barrier joins the ranks between steps. A rank whose part of a step ends early
// (the last pipeline stage of a zero-bubble schedule, which finishes its weight gradients
// before the first stage does) starts the next step early, and only what the plan itself
// waits for (a recv, a collective such as fp16's overflow check) holds it. One simulated
// step starts every rank at once, so it prices such plans slower than their steady state.

#include "simulator/sim_graph.h"

namespace pw::cost {

// `one` (a single step) repeated `steps` times: every instruction copied per step with its
// dependencies, partner and collective renumbered within the step, each rank's order the
// steps one after the other (so each stream runs its steps in order), per-step slots copied
// (persistent ones shared). The simulator starts a rank's step s + 1 once all of its step s
// has finished, issuing it as it issued the first. Errors: steps < 1, a graph already
// repeated.
StatusOr<SimGraph> RepeatSteps(const SimGraph& one, int steps);

}  // namespace pw::cost
