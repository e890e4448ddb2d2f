#include "tools/in_run_costs.h"

#include <mutex>
#include <unordered_map>

#include "cost_model/op_signature.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/interpreter.h"
#include "executor/local_ranks.h"
#include "executor/sequential_plan.h"
#include "ops/registry.h"
#include "simulator/sim_graph.h"
#include "simulator/stale_bytes.h"

namespace pw::tools {
namespace {

// The signature key of each op an interpreter runs, computed once ("" for communication,
// which the table prices from --comm's run): the op's vars are looked up in its own program
// first (ops the executor adds find them in the module).
class SignatureKeys {
 public:
  StatusOr<std::string> KeyOf(const Module& module, const Op& op) {
    if (auto it = keys_.find(&op); it != keys_.end()) return it->second;
    if (programs_.empty())
      for (const Program& p : module.programs())
        for (const Op& o : p.ops()) programs_[&o] = &p;
    auto owner = programs_.find(&op);
    const Program* program = owner == programs_.end() ? nullptr : owner->second;
    PW_ASSIGN_OR_RETURN(cost::OpSignature sig,
                        cost::SignatureOf(op, ops::Registry(), [&](const std::string& name) {
                          return module.FindVar(name, program);
                        }));
    return keys_[&op] = sig.is_communication ? "" : sig.key;
  }

 private:
  std::unordered_map<const Op*, const Program*> programs_;
  std::unordered_map<const Op*, std::string> keys_;
};

// The module as the run trains it: its plan, or its sequential plan of `micro_batches`.
StatusOr<Module> PlannedForRun(const Module& module, int micro_batches) {
  if (!module.plan.empty()) return module;
  return WithSequentialPlan(module, micro_batches);
}

}  // namespace

Status CountInRunStaleBytes(const Module& module, int micro_batches, cost::StaleCounts& counts) {
  PW_ASSIGN_OR_RETURN(Module planned, PlannedForRun(module, micro_batches));
  // The counts depend on the order and the tensors alone: roofline prices do.
  PW_ASSIGN_OR_RETURN(cost::DeviceSpec cpu, cost::BuiltinDeviceSpec("cpu"));
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> roofline,
                      cost::Estimator::Create(cpu, cost::OpCostTable()));
  PW_ASSIGN_OR_RETURN(cost::SimGraph graph,
                      cost::BuildSimGraph(planned, *roofline, ops::Registry()));
  counts.AddPlan(ScheduleOf(module), cost::StaleBytesBySignature(graph, counts.capacities()));
  return OkStatus();
}

StatusOr<std::map<std::string, std::vector<double>>> MeasureOpsInRun(const Module& module,
                                                                     const InRunOptions& options) {
  PW_ASSIGN_OR_RETURN(Module planned, PlannedForRun(module, options.micro_batches));
  std::mutex mu;
  std::map<std::string, std::vector<double>> seconds;
  std::map<const Interpreter*, SignatureKeys> keys;  // one per rank
  const bool cpu_time = options.kernel_threads == 1;
  RankRunOptions run;
  run.steps = options.steps;
  run.warmup_steps = 1;
  run.traced_steps = options.steps;
  run.trace_cpu_time = cpu_time;
  run.on_traced_step = [&](const Interpreter& interp) -> Status {
    std::lock_guard<std::mutex> lock(mu);
    SignatureKeys& rank_keys = keys[&interp];
    for (const Instr& instr : interp.lowered().instrs) {
      const Instr::Times& t = instr.times;
      if (instr.kind != Instr::Kind::kKernel || !instr.op || t.ended == 0 ||
          t.began < interp.step_began_ns())
        continue;  // not a kernel, or not run this step
      PW_ASSIGN_OR_RETURN(std::string key, rank_keys.KeyOf(interp.module(), *instr.op));
      if (key.empty()) continue;
      seconds[key].push_back(static_cast<double>(cpu_time ? t.cpu : t.ended - t.began) * 1e-9);
    }
    return OkStatus();
  };
  // Each compute kernel alone on a core (others wait), as the simulator prices it.
  cpu::SerializeComputeKernels(true);
  StatusOr<LocalRunResult> ran = RunLocalRanks(planned, run, options.kernel_threads);
  cpu::SerializeComputeKernels(false);
  PW_RETURN_IF_ERROR(ran.status());
  return seconds;
}

}  // namespace pw::tools
