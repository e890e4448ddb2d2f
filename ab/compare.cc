#include "ab/compare.h"

#include <filesystem>

#include "executor/plan_check.h"
#include "executor/run_dir_claim.h"
#include "executor/run_report.h"
#include "executor/training_feed.h"
#include "ir/proto_io.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"

namespace pw::ab {
namespace {

Status CheckOne(const Module& module, bool strict_events) {
  if (module.plan.empty()) return OkStatus();
  LoweringOptions lowering;
  lowering.feeds = ModuleInputs(module);
  lowering.loss = ModuleLoss(module);
  lowering.strict_events = strict_events;
  return CheckPlanForAllRanks(module, lowering);
}

}  // namespace

StatusOr<Module> PlanWithPipeline(const Module& module, const std::string& pipeline,
                                  std::shared_ptr<cost::Estimator> estimator) {
  Module out = module;
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  PassContext context(ops::Registry());
  if (estimator) AttachCostModel(std::move(estimator), context);
  PW_RETURN_IF_ERROR(pm.Run(out, context).status());
  return out;
}

StatusOr<SimulatedComparison> CompareSimulated(const Module& a, const Module& b,
                                               const SimulateOptions& options) {
  if (!options.estimator)
    return InvalidArgument("CompareSimulated needs an estimator (MakeEstimator)");
  SimulatedComparison out;
  StatusOr<SimulatedPlan> sa =
      SimulatePlan(a, options.estimator, options.micro_batches, options.timeline);
  if (!sa.ok()) return sa.status().WithContext("plan A");
  StatusOr<SimulatedPlan> sb =
      SimulatePlan(b, options.estimator, options.micro_batches, options.timeline);
  if (!sb.ok()) return sb.status().WithContext("plan B");
  out.a = std::move(*sa);
  out.b = std::move(*sb);
  out.report = AbReport::Sim{options.estimator->device().name(), out.a.figures, out.b.figures};
  return out;
}

Status CheckRunnable(const Module& a, const Module& b, bool strict_events) {
  PW_RETURN_IF_ERROR(CheckOne(a, strict_events).WithContext("plan A"));
  return CheckOne(b, strict_events).WithContext("plan B");
}

StatusOr<AbReport::Run> CompareMeasured(const Module& a, const Module& b, AbRunSettings settings) {
  namespace fs = std::filesystem;
  PW_RETURN_IF_ERROR(CheckRunnable(a, b, settings.strict_events));
  settings.keep_rounds = !settings.run_dir.empty();
  if (settings.run_dir.empty()) {
    PW_ASSIGN_OR_RETURN(settings.run_dir, MakeRunDir("pipeweave-ab"));
  }
  StatusOr<MeasuredAB> measured = [&]() -> StatusOr<MeasuredAB> {
    // Held until both plans have run: a second run on this directory is refused at once.
    PW_ASSIGN_OR_RETURN(RunDirClaim claim, RunDirClaim::Claim(settings.run_dir));
    // Ranks load the prepared modules, so the passes run once.
    settings.module_a = (fs::path(settings.run_dir) / "a.pb").string();
    settings.module_b = (fs::path(settings.run_dir) / "b.pb").string();
    PW_RETURN_IF_ERROR(SaveModule(a, settings.module_a));
    PW_RETURN_IF_ERROR(SaveModule(b, settings.module_b));
    return RunAB(settings);
  }();
  // A failed run keeps its directory: the error points at the ranks' logs in it.
  if (!measured.ok()) return measured.status();
  if (!settings.keep_rounds) {
    std::error_code ignored;  // a temporary directory left behind costs disk, not the answer
    fs::remove_all(settings.run_dir, ignored);
  }
  AbReport::Run run;
  run.nproc = settings.nproc;
  run.rounds = settings.rounds;
  run.steps = settings.steps;
  run.backend = settings.backend;
  run.loss_tolerance = settings.loss_tolerance;
  run.measured = std::move(*measured);
  return run;
}

}  // namespace pw::ab
