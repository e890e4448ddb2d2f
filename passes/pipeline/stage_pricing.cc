#include "passes/pipeline/stage_pricing.h"

#include <algorithm>

#include "cost_model/op_price.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"

namespace pw::pipeline {

StatusOr<ActionCosts> PriceStages(const Module& module, const ModuleStages& stages,
                                  const cost::Estimator& estimator, const OpRegistry& ops) {
  const int n = stages.num_stages();
  if (n == 0) return FailedPrecondition("the module has no pipeline stages to price");
  const RankLayout layout(module.mesh);
  auto rank_of = [&](int stage) { return layout.Rank({0, stages.stage_to_rank[stage], 0}); };
  std::vector<double> f(n, 0), b(n, 0), w(n, 0), sent_bytes(n, 0);
  for (const auto& [key, name] : stages.programs) {
    const auto& [stage, kind] = key;
    const Program* program = module.FindProgram(name);
    if (!program) return NotFound("program '", name, "' of stage ", stage, " is missing");
    auto lookup = [&](const std::string& v) { return module.FindVar(v, program); };
    double seconds = 0;
    auto add = [&](const Op& op) -> Status {
      StatusOr<cost::OpPrice> price =
          cost::PriceOp(op, module, rank_of(stage), estimator, ops, lookup);
      if (!price.ok()) return price.status().WithContext(StrCat("pricing program '", name, "'"));
      seconds += price->seconds;
      return OkStatus();
    };
    // The executor adds each micro-batch's parameter gradient into its sum right after
    // the op that makes it, or that op (a weight-gradient GEMM) adds it itself: work of
    // that program, as the simulator counts it.
    auto summed = [&](const std::string& v) {
      return kind != kForwardKind ? ParamGradDecl(v, lookup) : nullptr;
    };
    for (size_t i = 0; i < program->ops().size(); ++i) {
      const ExecutedOp run = ExecutedForm(*program, i, summed);
      PW_RETURN_IF_ERROR(add(run.op));
      for (const std::string& v : run.added)
        PW_RETURN_IF_ERROR(add(AddedWorkOp(WorkKind::kAccumulate, v)));
    }
    if (kind == kForwardKind) {
      f[stage] = seconds;
      // What the next stage's forward reads of this one's outputs: the activation handed
      // on (not what this stage keeps for its own backward).
      if (auto next = stages.programs.find({stage + 1, kForwardKind});
          next != stages.programs.end()) {
        if (const Program* reader = module.FindProgram(next->second)) {
          const std::vector<std::string>& read = reader->info().inputs;
          for (const std::string& v : program->info().outputs)
            if (std::find(read.begin(), read.end(), v) != read.end())
              if (const Var* var = lookup(v)) sent_bytes[stage] += var->num_bytes();
        }
      }
    } else if (kind == kBackwardKind || kind == kBackwardInputKind) {
      b[stage] = seconds;
    } else if (kind == kBackwardWeightKind) {
      w[stage] = seconds;
    }
  }
  ActionCosts costs;
  costs.forward = costs.backward = costs.weight = 0;
  double total = 0;
  for (int s = 0; s < n; ++s) {
    costs.forward += 1e3 * f[s] / n;
    costs.backward += 1e3 * b[s] / n;
    costs.weight += 1e3 * w[s] / n;
    total += f[s] + b[s] + w[s];
  }
  if (total <= 0) return FailedPrecondition("the cost model prices every stage program at zero");
  for (int s = 0; s < n; ++s) costs.stage_scale.push_back((f[s] + b[s] + w[s]) * n / total);
  // The largest activation a stage hands on, between the ranks of stages s and s + 1.
  for (int s = 0; s + 1 < n; ++s) {
    if (stages.stage_to_rank[s] == stages.stage_to_rank[s + 1]) continue;
    const bool inter_node = !cost::SameNode(estimator.device(), rank_of(s), rank_of(s + 1));
    costs.comm = std::max(costs.comm, 1e3 * estimator.comm()
                                                .Time(cost::CommKind::kSendRecv, sent_bytes[s], 2,
                                                      cost::GroupSpan::Pair(inter_node))
                                                .seconds);
  }
  return costs;
}

namespace {
std::string DefaultText(std::string_view otherwise) {
  return StrCat("(default: the cost model's", otherwise.empty() ? "" : ", else ", otherwise, ")");
}
}  // namespace

StageCostOptions::StageCostOptions(Pass* pass, std::string_view otherwise_compute,
                                   std::string_view otherwise_comm)
    : forward_(pass, "F", StrCat("forward cost per stage ", DefaultText(otherwise_compute))),
      backward_(pass, "B",
                StrCat("input-gradient cost per stage ", DefaultText(otherwise_compute))),
      weight_(pass, "W", StrCat("weight-gradient cost per stage ", DefaultText(otherwise_compute))),
      comm_(pass, "comm", StrCat("latency of a cross-rank edge ", DefaultText(otherwise_comm))) {}

StatusOr<ActionCosts> PlanningCosts(const Module& module, const ModuleStages& stages,
                                    const PassContext& context, const GivenStageCosts& given,
                                    std::string_view pass, const ActionCosts* defaults) {
  const cost::Estimator* estimator = context.Find<cost::Estimator>();
  ActionCosts costs = defaults ? *defaults : ActionCosts{};
  if (estimator) {
    PW_ASSIGN_OR_RETURN(costs, PriceStages(module, stages, *estimator, context.ops()));
  }
  const struct {
    const char* option;
    const std::optional<double>& value;
    double& cost;
  } figures[] = {{"F", given.forward, costs.forward},
                 {"B", given.backward, costs.backward},
                 {"W", given.weight, costs.weight},
                 {"comm", given.comm, costs.comm}};
  for (const auto& f : figures) {
    if (f.value) {
      f.cost = *f.value;
    } else if (!estimator && !defaults) {
      return FailedPrecondition(pass, " needs stage costs: option '", f.option,
                                "' is not given and no cost model is attached (pass --device "
                                "D, and --costs FILE from 'pipeweave profile', to 'pipeweave "
                                "opt')");
    }
  }
  return costs;
}

}  // namespace pw::pipeline
