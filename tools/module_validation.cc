#include "tools/module_validation.h"

#include "executor/plan_check.h"
#include "ir/plan_actions.h"
#include "ir/proto_io.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pipeline/schedule_checker.h"

namespace pw::tools {

Status ValidateModule(const Module& module) {
  PW_RETURN_IF_ERROR(VerifyModule(module, ops::Registry()));
  if (module.plan.empty()) return OkStatus();
  PW_RETURN_IF_ERROR(CheckPlan(module));
  StatusOr<ActionSchedule> schedule = PlanToActionSchedule(module.plan);
  if (!schedule.ok()) return schedule.status().WithContext("plan");
  return pipeline::CheckSchedule(*schedule).WithContext("plan");
}

StatusOr<Module> LoadValidModule(const std::string& path) {
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(path));
  PW_RETURN_IF_ERROR(ValidateModule(module).WithContext(path));
  return module;
}

}  // namespace pw::tools
