#pragma once
// The pipeline view of a module after split-program: its virtual stages in model order,
// the rank of each, the data edges that skip stages, and the program every (stage, kind)
// runs. The schedule and insert-p2p passes plan over this view.

#include <map>
#include <string>
#include <vector>

#include "ir/action.h"
#include "ir/module.h"
#include "ir/plan_actions.h"
#include "ir/status.h"

namespace pw::pipeline {

// Program kinds split-program creates.
inline constexpr const char* kForwardKind = "forward";
inline constexpr const char* kBackwardKind = "backward";
inline constexpr const char* kBackwardInputKind = "backward_input";
inline constexpr const char* kBackwardWeightKind = "backward_weight";
inline constexpr const char* kOptimizerKind = "optimizer";

// "stage{s}_{kind}": the name split-program gives the program of virtual stage s.
std::string StageProgramName(int virtual_stage, const std::string& kind);

struct ModuleStages {
  int num_ranks = 0;
  std::vector<int> stage_to_rank;  // virtual stage -> rank (the ops' `stage`)
  std::vector<int> chunk;          // virtual stage -> the ops' `chunk`
  std::vector<StageEdge> skip_edges;
  bool split_backward = false;  // has backward_input/backward_weight programs
  std::map<std::pair<int, std::string>, std::string> programs;  // (stage, kind) -> name

  int num_stages() const { return static_cast<int>(stage_to_rank.size()); }
  // Names programs for ActionScheduleToPlan (with optimizer jobs; on a split backward a
  // full backward B runs the stage's I and W programs).
  PlanNaming Naming() const;
};

// Reads the programs split-program made (ProgramInfo kind/stage/chunk and the name
// pattern above); an error when the module has not been split.
StatusOr<ModuleStages> ReadModuleStages(const Module& module);

// For the passes that lower a planned schedule (insert-p2p, order-comm): the plan's
// compute schedule with the module's skip edges, and the plan replaced by the lowered
// schedule, its kind and micro-batches kept.
StatusOr<ActionSchedule> PlannedSchedule(const Module& module, const ModuleStages& stages);
void ReplacePlan(Module& module, const ActionSchedule& lowered, const ModuleStages& stages);

}  // namespace pw::pipeline
