// overlap-param-gather: the distributed optimizer's parameter all-gathers run under the next
// step's forward. distributed-optimizer updates each sharded parameter's own rows in place
// and all-gathers the parameter right after; this pass defers each such all-gather to the
// start of the next step (c_sync_shards on dp_comm, in the order the step first reads the
// parameters: ir/grad_reduce.h), where the forward of the first layers waits only for its
// own parameters while the rest arrive. The same rows are gathered: bit-identical training.
// Between steps the parameters then hold only this rank's updated rows until the executor
// syncs them (it does before saving a checkpoint or the final parameters).

#include "ir/grad_reduce.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

// Of the optimizer programs' parameter all-gathers over dp: how many there are, and how
// many gather from a view of the parameter's own rows (the ones that can wait).
struct Gathers {
  int all = 0, deferrable = 0;
};
Gathers CountGathers(const Module& module) {
  Gathers n;
  for (const Program& program : module.programs()) {
    if (program.info().kind != "optimizer") continue;
    for (const Op& op : program.ops()) {
      if (op.type == "c_all_gather" && op.attrs.GetString("group") == "dp") ++n.all;
      if (op.type == "c_split" && op.attrs.GetBool("view", false) &&
          op.attrs.GetString("group") == "dp")
        ++n.deferrable;
    }
  }
  return n;
}

class OverlapParamGatherPass : public Pass {
 public:
  std::string_view name() const override { return "overlap-param-gather"; }
  std::string_view description() const override {
    return "After distributed-optimizer: each sharded parameter's all-gather over dp runs at "
           "the start of the next step (on dp_comm, in the order the step first reads the "
           "parameters) instead of right after its update, under the forward. Bit-identical; "
           "between steps the executor syncs the parameters before saving or returning them. "
           "Changes nothing at dp 1 or without sharded updates.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "overlap-param-gather needs a plan: run it after split-program, schedule and "
          "distributed-optimizer");
    if (module.mesh.dp < 2) return false;
    const Gathers gathers = CountGathers(module);
    if (gathers.all == 0)
      return FailedPrecondition(
          "overlap-param-gather: no parameter is updated in shards (nothing to gather): run "
          "distributed-optimizer before it");
    // Parameters the optimizer program reads again after gathering them (amp's 16-bit
    // copies) must be whole within the step: their gathers stay.
    context.AddStatistic("param-gathers-kept", gathers.all - gathers.deferrable);
    if (gathers.deferrable == 0) return false;
    if (module.metadata.GetString(kMetaParamGather) == kParamGatherNextStep) return false;
    module.metadata.Set(kMetaParamGather, std::string(kParamGatherNextStep));
    context.AddStatistic("param-gathers-deferred", gathers.deferrable);
    return true;
  }
};

}  // namespace

PW_REGISTER_PASS(OverlapParamGatherPass)

}  // namespace pw
