#include "passes/pipeline/module_stages.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "ir/number.h"

namespace pw::pipeline {

std::string StageProgramName(int virtual_stage, const std::string& kind) {
  return "stage" + std::to_string(virtual_stage) + "_" + kind;
}

PlanNaming ModuleStages::Naming() const {
  PlanNaming naming;
  naming.optimizer_jobs = true;
  naming.split_backward = split_backward;
  auto programs_copy = programs;
  naming.program = [programs_copy](JobKind kind, int stage) -> std::string {
    const char* k = nullptr;
    switch (kind) {
      case JobKind::kForward:
        k = kForwardKind;
        break;
      case JobKind::kBackward:
        k = kBackwardKind;
        break;
      case JobKind::kBackwardInput:
        k = kBackwardInputKind;
        break;
      case JobKind::kBackwardWeight:
        k = kBackwardWeightKind;
        break;
      case JobKind::kOptimizer:
        k = kOptimizerKind;
        break;
      default:
        return "";
    }
    auto it = programs_copy.find({stage, k});
    return it == programs_copy.end() ? "" : it->second;
  };
  return naming;
}

StatusOr<ModuleStages> ReadModuleStages(const Module& module) {
  ModuleStages out;
  std::map<int, std::pair<int, int>> placed;  // virtual stage -> (rank, chunk)
  for (const Program& p : module.programs()) {
    const ProgramInfo& info = p.info();
    if (info.kind.empty() || !info.segment_of.empty() || !info.variant_of.empty()) continue;
    const std::string prefix = "stage";
    size_t underscore = p.name().find('_');
    if (p.name().rfind(prefix, 0) != 0 || underscore == std::string::npos)
      return FailedPrecondition("program '", p.name(), "' is not named stage<N>_<kind> ",
                                "(run split-program first)");
    // The number indexes the stage tables below: parsed exactly, and within an action's
    // 16-bit stage.
    constexpr int64_t kMaxStage = std::numeric_limits<int16_t>::max();
    StatusOr<int64_t> number = ParseInteger(
        std::string_view(p.name()).substr(prefix.size(), underscore - prefix.size()), 0, kMaxStage);
    if (!number.ok())
      return FailedPrecondition("program '", p.name(), "' is not named stage<N>_<kind> with N in ",
                                "[0, ", kMaxStage, "]: ", number.status().message());
    const int vs = static_cast<int>(*number);
    placed[vs] = {info.stage, info.chunk};
    out.programs[{vs, info.kind}] = p.name();
    if (info.kind == kBackwardInputKind || info.kind == kBackwardWeightKind)
      out.split_backward = true;
  }
  if (placed.empty())
    return FailedPrecondition("the module has no per-stage programs (run split-program first)");
  const int S = placed.rbegin()->first + 1;
  out.stage_to_rank.assign(S, -1);
  out.chunk.assign(S, 0);
  for (auto& [vs, where] : placed) {
    out.stage_to_rank[vs] = where.first;
    out.chunk[vs] = where.second;
  }
  for (int s = 0; s < S; ++s)
    if (out.stage_to_rank[s] < 0) return FailedPrecondition("virtual stage ", s, " has no program");
  out.num_ranks = std::max(
      module.mesh.pp, *std::max_element(out.stage_to_rank.begin(), out.stage_to_rank.end()) + 1);
  // Skip edges: a forward program reading an output of a forward program two or more
  // stages earlier.
  std::map<std::string, int> defined_by;
  for (int s = 0; s < S; ++s) {
    auto it = out.programs.find({s, kForwardKind});
    if (it == out.programs.end()) continue;
    for (const std::string& v : module.FindProgram(it->second)->info().outputs) defined_by[v] = s;
  }
  std::set<std::pair<int, int>> skips;
  for (int s = 0; s < S; ++s) {
    auto it = out.programs.find({s, kForwardKind});
    if (it == out.programs.end()) continue;
    for (const std::string& v : module.FindProgram(it->second)->info().inputs) {
      auto d = defined_by.find(v);
      if (d != defined_by.end() && d->second + 1 < s) skips.insert({d->second, s});
    }
  }
  for (auto [a, b] : skips) out.skip_edges.push_back({a, b});
  return out;
}

StatusOr<ActionSchedule> PlannedSchedule(const Module& module, const ModuleStages& stages) {
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, PlanToActionSchedule(module.plan));
  schedule.skip_edges = stages.skip_edges;
  return schedule;
}

void ReplacePlan(Module& module, const ActionSchedule& lowered, const ModuleStages& stages) {
  const std::string kind = module.plan.schedule;
  const int micro_batches = module.plan.num_micro_batches;
  module.plan = ActionScheduleToPlan(lowered, kind, stages.Naming());
  module.plan.num_micro_batches = micro_batches;
}

}  // namespace pw::pipeline
