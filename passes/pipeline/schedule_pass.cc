// schedule{kind=K,micro-batches=M[,mem-limit=X][,file=PATH]...}: builds the module's Plan
// from the per-stage programs split-program made: one ordered job list per rank, each job
// naming the program it runs, and an optimizer job per stage at the end.
//
// Backward kinds: a schedule with I and W needs split-program{split-backward=true}. A full
// backward B runs on either module: its `backward` program, or on a split module the
// stage's I program then its W program back to back (one B job with those two as
// sub-jobs). So dualpipe-v, which mixes B (in its overlapped F&B pairs) with I/W pairs in
// the cool-down, runs on a split module; so does a B-only kind such as 1f1b, computing the
// same gradients in two programs instead of one.

#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/schedule_checker.h"
#include "passes/pipeline/schedule_generators.h"
#include "passes/pipeline/stage_pricing.h"

namespace pw {
namespace {

using pipeline::ScheduleKind;

bool SplitsBackward(const ActionSchedule& s) {
  for (const auto& rank : s.ranks)
    for (const Action& a : rank)
      for (const Action& p : s.Parts(a))
        if (p.type == ActionType::kBackwardInput || p.type == ActionType::kBackwardWeight)
          return true;
  return false;
}

class SchedulePass : public Pass {
 public:
  std::string_view name() const override { return "schedule"; }
  std::string_view description() const override {
    return "Builds the plan: for every rank the ordered jobs of a pipeline schedule over the "
           "stage programs of split-program. kind: fthenb, 1f1b, eager-1f1b, "
           "interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipe-v, zb-auto, csv (file=). Kinds with "
           "I and W (zero-bubble, dualpipe-v) need split-program{split-backward=true}; there a "
           "full backward B runs the stage's I and W programs back to back. The plan is checked "
           "(placement, order, memory, deadlock) before it is stored.";
  }

  Status ValidateOptions() const override {
    PW_RETURN_IF_ERROR(pipeline::ParseScheduleKind(kind.value()).status());
    if (micro_batches.value() < 1 && kind.value() != "csv")
      return InvalidArgument("micro-batches must be at least 1");
    if (kind.value() == "csv" && file.value().empty())
      return InvalidArgument("kind=csv needs file=PATH");
    return OkStatus();
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    PW_ASSIGN_OR_RETURN(pipeline::ModuleStages stages, pipeline::ReadModuleStages(module));
    pipeline::ScheduleSpec spec;
    PW_ASSIGN_OR_RETURN(spec.kind, pipeline::ParseScheduleKind(kind.value()));
    spec.num_stages = stages.num_stages();
    spec.num_ranks = stages.num_ranks;
    spec.num_micro_batches = micro_batches.value();
    spec.mem_limit = mem_limit.value();
    spec.csv_file = file.value();
    if (spec.kind == ScheduleKind::kZbH2 || spec.kind == ScheduleKind::kZbAuto) {
      // The kinds that plan by cost price the stages with the cost model when one is
      // attached (as the Zero Bubble paper's search plans with profiled F, B, W and comm),
      // else F = B = W = 1 and comm = 0; each figure given replaces its price.
      const ActionCosts unit;
      PW_ASSIGN_OR_RETURN(spec.costs, pipeline::PlanningCosts(module, stages, context,
                                                              costs.Given(), name(), &unit));
      if (context.Find<cost::Estimator>()) {
        context.AddStatistic("priced-F-us", static_cast<int64_t>(1e3 * spec.costs.forward + 0.5));
        context.AddStatistic("priced-B-us", static_cast<int64_t>(1e3 * spec.costs.backward + 0.5));
        context.AddStatistic("priced-W-us", static_cast<int64_t>(1e3 * spec.costs.weight + 0.5));
        context.AddStatistic("priced-comm-us", static_cast<int64_t>(1e3 * spec.costs.comm + 0.5));
      }
    }
    spec.costs.w_mem = w_mem.value();
    // The module's placement decides loop or v; a kind that needs the other one fails in
    // Validate with its own message.
    spec.placement =
        stages.stage_to_rank == PlaceStages(StagePlacement::kV, spec.num_stages, spec.num_ranks) &&
                spec.num_stages > spec.num_ranks
            ? pipeline::Placement::kV
            : pipeline::Placement::kLoop;
    if (spec.kind != ScheduleKind::kCsv && spec.StageToRank() != stages.stage_to_rank)
      return FailedPrecondition("the module's stages are placed neither in a loop nor in a V ",
                                "over ", spec.num_ranks, " ranks");
    PW_ASSIGN_OR_RETURN(ActionSchedule schedule, pipeline::GenerateSchedule(spec));
    if (spec.kind == ScheduleKind::kCsv) {
      if (schedule.stage_to_rank != stages.stage_to_rank)
        return FailedPrecondition("the CSV places stages on other ranks than the module does");
      if (micro_batches.is_set() && schedule.num_micro_batches != micro_batches.value())
        return FailedPrecondition("the CSV runs ", schedule.num_micro_batches,
                                  " micro-batches, not ", micro_batches.value());
    }
    if (SplitsBackward(schedule) && !stages.split_backward)
      return FailedPrecondition("kind ", kind.value(), " splits backwards into I and W; run ",
                                "split-program{split-backward=true} first");
    schedule.skip_edges = stages.skip_edges;
    pipeline::CheckOptions check;
    check.mem_limit = spec.kind == ScheduleKind::kZbAuto ? 0 : spec.mem_limit;
    check.w_mem = spec.costs.w_mem;
    Status checked = pipeline::CheckSchedule(schedule, check);
    if (!checked.ok()) return checked.WithContext("schedule check");
    module.plan = ActionScheduleToPlan(schedule, kind.value(), stages.Naming());
    module.plan.num_micro_batches = schedule.num_micro_batches;
    context.AddStatistic("jobs", static_cast<int64_t>(schedule.num_actions()));
    return true;
  }

 private:
  Option<std::string> kind{this,
                           "kind",
                           "schedule kind",
                           "1f1b",
                           {"fthenb", "1f1b", "eager-1f1b", "interleaved-1f1b", "zb-h1", "zb-h2",
                            "zb-v", "dualpipe-v", "zb-auto", "csv"}};
  Option<int> micro_batches{this, "micro-batches", "micro-batches per step", 1};
  Option<double> mem_limit{this, "mem-limit",
                           "activation memory limit per rank in M_B (zb-auto's constraint; "
                           "checked for the other kinds); 0 for none",
                           0.0};
  Option<double> w_mem{this, "w-mem", "memory a W releases, as a fraction of M_B", 0.5};
  Option<std::string> file{this, "file", "the PyTorch schedule CSV of kind=csv", ""};
  pipeline::StageCostOptions costs{this, "1", "0"};  // zb-h2 and zb-auto plan with them
};

}  // namespace

PW_REGISTER_PASS(SchedulePass)

}  // namespace pw
