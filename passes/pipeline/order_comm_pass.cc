// order-comm{semantics=rendezvous|eager,F=,B=,W=,comm=,max-evals=}: lowers the plan's
// schedule with the send/recv order the search finds (comm_order_search.h): the best
// makespan under the action-level simulator, proven deadlock-free by the checker under the
// target's semantics (rendezvous for NCCL's blocking p2p). It runs instead of insert-p2p.
// The simulator prices stages with the cost model (`opt --device/--costs`,
// stage_pricing.h); F, B, W and comm given as options replace its figures, and without a
// cost model all four must be given.

#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/pipeline/comm_order_search.h"
#include "passes/pipeline/exchange_waits.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/stage_pricing.h"

namespace pw {
namespace {

class OrderCommPass : public Pass {
 public:
  std::string_view name() const override { return "order-comm"; }
  std::string_view description() const override {
    return "Adds the send/recv jobs in the order (and batching) that gives the lowest "
           "simulated makespan: starts from the fixed orders (naive, parity, batched; "
           "megatron for 1F1B and interleaved 1F1B) and "
           "improves by local moves that keep every pair of ranks' order the same on both "
           "sides, each checked deadlock-free under the semantics (rendezvous for NCCL). Runs "
           "instead of insert-p2p.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition("the module has no plan (run schedule first)");
    if (pipeline::HasJobEvents(module.plan))
      return FailedPrecondition(
          "order-comm rebuilds the plan's send/recv jobs and would drop the events its jobs "
          "carry (insert-p2p{wait=exchange}): run order-comm in place of insert-p2p");
    PW_ASSIGN_OR_RETURN(pipeline::ModuleStages stages, pipeline::ReadModuleStages(module));
    PW_ASSIGN_OR_RETURN(ActionSchedule schedule, pipeline::PlannedSchedule(module, stages));
    pipeline::CommOrderOptions options;
    PW_ASSIGN_OR_RETURN(options.semantics, ParseCommSemantics(semantics.value()));
    // The cost model's stage costs, each F, B, W and comm given replacing its figure.
    PW_ASSIGN_OR_RETURN(options.costs,
                        pipeline::PlanningCosts(module, stages, context, costs.Given(), name(),
                                                /*defaults=*/nullptr));
    options.max_evaluations = max_evaluations.value();
    PW_ASSIGN_OR_RETURN(pipeline::CommOrderResult result,
                        pipeline::SearchCommOrder(schedule, options));
    pipeline::ReplacePlan(module, result.schedule, stages);
    double best_fixed = 0;
    for (const pipeline::FixedOrderMakespan& f : result.fixed)
      if (f.valid && (best_fixed == 0 || f.makespan < best_fixed)) best_fixed = f.makespan;
    context.AddStatistic(StrCat("started-from-", result.start));
    context.AddStatistic("accepted-moves", result.accepted_moves);
    context.AddStatistic("evaluations", result.evaluations);
    context.AddStatistic("makespan-permille-of-best-fixed",
                         static_cast<int64_t>(1000 * result.makespan / best_fixed + 0.5));
    return true;
  }

 private:
  Option<std::string> semantics{this,
                                "semantics",
                                "when a send/recv completes: rendezvous (blocking, NCCL) or "
                                "eager (isend/irecv)",
                                "rendezvous",
                                {"rendezvous", "eager"}};
  pipeline::StageCostOptions costs{this, "", ""};
  Option<int> max_evaluations{this, "max-evals", "simulations the search may run", 5000};
};

}  // namespace

PW_REGISTER_PASS(OrderCommPass)

}  // namespace pw
