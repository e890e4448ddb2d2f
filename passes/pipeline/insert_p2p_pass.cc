// insert-p2p{order=naive|parity|batched|megatron|torch, wait=consumers|exchange}: adds the
// SEND/RECV jobs of every value that crosses ranks to the module's plan (see p2p_insertion.h for
// the orders), then checks the result under the semantics its order is designed for; with
// wait=exchange each rank's next job also waits for the whole exchange before it
// (exchange_waits.h).

#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/pipeline/exchange_waits.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "passes/pipeline/stage_pricing.h"

namespace pw {
namespace {

class InsertP2PPass : public Pass {
 public:
  std::string_view name() const override { return "insert-p2p"; }
  std::string_view description() const override {
    return "Adds send/recv jobs to the plan for every value crossing ranks (adjacent stages, "
           "skip connections; none between stages on one rank). order: naive (send after the "
           "producer, recv before the consumer), parity (Megatron's even/odd order, for "
           "blocking p2p), batched (one batch_isend_irecv per gap), megatron (Megatron-LM's "
           "exchanges: one between two steps, an interleaved rank's F and the B after it "
           "being one step; 1F1B and interleaved 1F1B), torch (PyTorch's "
           "_add_send_recv; with merge-bw, _add_send_recv(_merge_bw(...))). parity and batched "
           "place each transfer where it happens in a run of the schedule, priced by the cost "
           "model when one is attached (opt --device), else at unit costs. wait: consumers (a "
           "job waits only for the transfers it reads; sends finish in the background) or "
           "exchange (the job after a run of sends and recvs waits for all of them, as "
           "Megatron's waits on every request of a batch_isend_irecv; parity, batched and "
           "megatron only).";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition("the module has no plan (run schedule first)");
    PW_ASSIGN_OR_RETURN(pipeline::ModuleStages stages, pipeline::ReadModuleStages(module));
    PW_ASSIGN_OR_RETURN(ActionSchedule schedule, pipeline::PlannedSchedule(module, stages));
    if (schedule.HasComms()) return false;  // already lowered
    PW_ASSIGN_OR_RETURN(pipeline::P2POrder p2p_order, pipeline::ParseP2POrder(order.value()));
    const bool wait_exchange = wait.value() == "exchange";
    if (wait_exchange && pipeline::DesignedSemantics(p2p_order) != CommSemantics::kRendezvous)
      return InvalidArgument(
          "insert-p2p: wait=exchange blocks each rank until its transfers "
          "complete, which order=",
          order.value(),
          " may deadlock (it is designed for sends that return at once): "
          "use order=parity, batched or megatron");
    pipeline::P2POptions options;
    options.order = p2p_order;
    options.merge_backward = merge_backward.value();
    if (context.Find<cost::Estimator>() &&
        (p2p_order == pipeline::P2POrder::kParity || p2p_order == pipeline::P2POrder::kBatched)) {
      const ActionCosts unit;
      PW_ASSIGN_OR_RETURN(options.costs,
                          pipeline::PlanningCosts(module, stages, context, {}, name(), &unit));
      context.AddStatistic("ordered-at-priced-costs");
    }
    PW_ASSIGN_OR_RETURN(ActionSchedule lowered, pipeline::InsertP2P(schedule, options));
    pipeline::CheckOptions check;
    check.semantics = pipeline::DesignedSemantics(p2p_order);
    Status checked = pipeline::CheckSchedule(lowered, check);
    if (!checked.ok()) return checked.WithContext("insert-p2p check");
    pipeline::ReplacePlan(module, lowered, stages);
    if (wait_exchange)
      context.AddStatistic("exchanges-waited-for", pipeline::WaitForExchanges(module.plan));
    context.AddStatistic("p2p-jobs",
                         static_cast<int64_t>(lowered.num_actions() - schedule.num_actions()));
    return true;
  }

 private:
  Option<std::string> order{this,
                            "order",
                            "placement and order of sends and recvs",
                            "naive",
                            {"naive", "parity", "batched", "megatron", "torch"}};
  Option<std::string> wait{this,
                           "wait",
                           "what a rank's next job waits for: the transfers it reads, or the "
                           "whole exchange before it",
                           "consumers",
                           {"consumers", "exchange"}};
  Option<bool> merge_backward{this, "merge-bw",
                              "order=torch: run PyTorch's _merge_bw first (an I directly "
                              "followed by its W becomes one B, idle cells go)",
                              false};
};

}  // namespace

PW_REGISTER_PASS(InsertP2PPass)

}  // namespace pw
