// overlap-param-gather: the distributed optimizer's parameter all-gathers run under the next
// step's forward. distributed-optimizer updates each sharded parameter's own rows in place
// and all-gathers the parameter right after; this pass defers each such all-gather to the
// start of the next step (c_sync_shards on dp_comm, in the order the step first reads the
// parameters: ir/grad_reduce.h), where the forward of the first layers waits only for its
// own parameters while the rest arrive, or keeps it after the update (at=update, or what
// the simulator finds faster with at=auto); either way a parameter no step reads whole
// waits until the parameters are synced. The same rows are gathered: bit-identical.
// Between steps the parameters then hold only this rank's updated rows until the executor
// syncs them (it does before saving a checkpoint or the final parameters). Under amp the
// 16-bit copies are what is gathered each step (GatherLowPrecisionCopies).

#include <vector>

#include "ir/grad_reduce.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/streams/fastest_variant.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

// Under amp the optimizer program gathers the updated f32 parameter and casts it whole to
// the 16-bit copy the forward reads. Rewritten so that each rank casts its own updated rows
// into the copy's own rows (a view) and the copy is gathered: the same values (a cast is
// element-wise), half the bytes on the wire for bf16, and the copy's gather can wait for
// the next step's start; the f32 parameter, which only this rank's update reads (its own
// rows), keeps its gather, which the executor defers to when parameters are synced. Returns
// how many updates it rewrote.
StatusOr<int> GatherLowPrecisionCopies(Program& program) {
  int rewritten = 0;
  std::vector<Op>& ops = program.ops();
  for (size_t k = 0; k < ops.size(); ++k) {
    const Op gather = ops[k];
    if (gather.type != "c_all_gather" || gather.attrs.GetString("group") != "dp") continue;
    const std::string rows = gather.Input("X"), param = gather.Output("Out");
    // The split that cut `rows` out of the parameter, and the one later reader: a cast.
    size_t split = ops.size(), cast = ops.size();
    for (size_t i = 0; i < k; ++i)
      if (ops[i].type == "c_split" && ops[i].Output("Out") == rows && ops[i].Input("X") == param)
        split = i;
    int readers = 0;
    for (size_t m = k + 1; m < ops.size(); ++m)
      ops[m].ForEachInput([&](const std::string& v) {
        if (v == param) ++readers, cast = m;
      });
    if (split == ops.size() || readers != 1 || ops[cast].type != "cast") continue;
    const std::string copy = ops[cast].Output("Out");
    const Var* copy_var = program.FindVar(copy);
    const Var* rows_var = program.FindVar(rows);
    if (!copy_var || !copy_var->persistable || !rows_var) continue;
    Var copy_rows = *rows_var;
    copy_rows.name = copy + "@dp_shard";
    copy_rows.dtype = copy_var->dtype;
    if (!program.AddVar(copy_rows))
      return FailedPrecondition("overlap-param-gather: program '", program.name(),
                                "' already declares '", copy_rows.name, "' (the pass ran twice?)");
    Op copy_split = ops[split];
    copy_split.SetInput("X", {copy}).SetOutput("Out", {copy_rows.name}).SetAttr("view", true);
    Op cast_rows = ops[cast];
    cast_rows.SetInput("X", {rows}).SetOutput("Out", {copy_rows.name});
    Op copy_gather = gather;
    copy_gather.SetInput("X", {copy_rows.name}).SetOutput("Out", {copy});
    ops[split].SetAttr("view", true);
    ops[cast] = std::move(copy_split);
    ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(cast) + 1,
               {std::move(cast_rows), std::move(copy_gather)});
    ++rewritten;
  }
  return rewritten;
}

// Of the optimizer programs' parameter all-gathers over dp: how many there are, and how
// many gather from a view of the parameter's own rows (InPlaceShardGather: the ones that
// can wait).
struct Gathers {
  int all = 0, deferrable = 0;
};
Gathers CountGathers(const Module& module) {
  Gathers n;
  for (const Program& program : module.programs()) {
    if (program.info().kind != "optimizer") continue;
    for (size_t o = 0; o < program.ops().size(); ++o) {
      const Op& op = program.ops()[o];
      if (op.type == "c_all_gather" && op.attrs.GetString("group") == "dp") ++n.all;
      if (op.type == "c_split" && op.attrs.GetBool("view", false) &&
          op.attrs.GetString("group") == "dp" && InPlaceShardGather(program, o))
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
           "parameters, under the forward) or right after its update (at=...); under amp the "
           "16-bit copies are gathered (each rank casts its own rows) and the f32 masters "
           "only when the parameters are synced, each rank holding only its rows of them "
           "until then (1/dp of their bytes). Bit-identical; between steps the executor "
           "syncs the parameters before saving or returning them. Changes nothing at dp 1.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "overlap-param-gather needs a plan: run it after split-program, schedule and "
          "distributed-optimizer");
    if (module.mesh.dp < 2) return false;
    int rewritten = 0;  // none on a second run: the casts read the rows already
    for (Program& program : module.programs()) {
      if (program.info().kind != "optimizer") continue;
      PW_ASSIGN_OR_RETURN(int n, GatherLowPrecisionCopies(program));
      rewritten += n;
    }
    context.AddStatistic("low-precision-copies-gathered", rewritten);
    const Gathers gathers = CountGathers(module);
    if (gathers.all == 0)
      return FailedPrecondition(
          "overlap-param-gather: no parameter is updated in shards (nothing to gather): run "
          "distributed-optimizer before it");
    // Parameters the optimizer program reads again after gathering them (amp's 16-bit
    // copies) must be whole within the step: their gathers stay.
    context.AddStatistic("param-gathers-kept", gathers.all - gathers.deferrable);
    if (gathers.deferrable == 0) return false;
    PW_ASSIGN_OR_RETURN(const std::string where, Placement(module, context));
    if (rewritten == 0 && module.metadata.GetString(kMetaParamGather) == where) return false;
    module.metadata.Set(kMetaParamGather, where);
    context.AddStatistic("param-gathers-deferred", gathers.deferrable);
    context.AddStatistic(where == kParamGatherNextStep ? "gathers-at-next-step"
                                                       : "gathers-after-update");
    return true;
  }

 private:
  Option<std::string> at{this,
                         "at",
                         "where the gathers of parameters the step reads run: next-step (its "
                         "start, under the forward), update (right after their update), or "
                         "auto (the faster in the simulator with --device, else next-step)",
                         "auto",
                         {"auto", "next-step", "update"}};

  StatusOr<std::string> Placement(const Module& module, PassContext& context) const {
    if (at.value() == "next-step") return std::string(kParamGatherNextStep);
    if (at.value() == "update") return std::string(kParamGatherAfterUpdate);
    const cost::Simulator* simulator = context.Find<cost::Simulator>();
    if (simulator == nullptr) return std::string(kParamGatherNextStep);
    const char* places[] = {kParamGatherNextStep, kParamGatherAfterUpdate};
    StatusOr<size_t> best = FastestVariant(module, *simulator, 2, [&](Module& trial, size_t i) {
      trial.metadata.Set(kMetaParamGather, std::string(places[i]));
    });
    if (!best.ok())
      return best.status().WithContext(
          "overlap-param-gather{at=auto} prices both placements with the simulator (give "
          "at=next-step or at=update to choose without it)");
    return std::string(places[*best]);
  }
};

}  // namespace

PW_REGISTER_PASS(OverlapParamGatherPass)

}  // namespace pw
