#pragma once
// The static checker run after every planning pass and by `pipeweave check`:
//  * placement: every action runs on the rank its stage is placed on;
//  * completeness and order: every (stage, micro-batch) has exactly one F and exactly one
//    B or one I and one W, with F before B/I before W on the stage's rank;
//  * communication: with send/recv actions, every value that crosses ranks has exactly
//    one SEND (after its producer) and one RECV (before its consumer), and none are sent
//    between stages on the same rank;
//  * memory: no rank holds more than the limit (M_B units), when a limit is given;
//  * deadlock freedom under the chosen comm semantics: reported as the cycle of waiting
//    (rank, action) pairs.
// Every error is one line that names the rank, the action and what is wrong.

#include "ir/action.h"
#include "ir/status.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {

struct CheckOptions {
  CommSemantics semantics = CommSemantics::kEager;
  double mem_limit = 0;  // M_B per rank; 0 means no limit
  double w_mem = 0.5;
};

// Only the placement, completeness, order and communication rules (no replay).
Status CheckStructure(const ActionSchedule& schedule);
// Everything, including memory and deadlock freedom.
Status CheckSchedule(const ActionSchedule& schedule, const CheckOptions& options = {});

// CheckSchedule and the timed simulation in one go: the deadlock check is a dependency
// replay, so the replay that times the schedule also proves it deadlock-free.
// `simulation.semantics` is taken from `options`.
StatusOr<TimedResult> CheckAndSimulate(const ActionSchedule& schedule, const CheckOptions& options,
                                       SimulationOptions simulation);

}  // namespace pw::pipeline
