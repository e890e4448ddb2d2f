#include "executor/sequential_plan.h"

namespace pw {
namespace {
constexpr const char* kSequentialSchedule = "sequential";
}  // namespace

StatusOr<Module> WithSequentialPlan(const Module& module, int micro_batches) {
  if (module.programs().size() != 1)
    return FailedPrecondition(
        "a module without a plan must have exactly one program, this one has ",
        module.programs().size());
  if (module.mesh.pp != 1)
    return FailedPrecondition("module has pp=", module.mesh.pp,
                              " but no plan (run the schedule pass)");
  if (micro_batches < 1) return InvalidArgument("micro-batches must be >= 1, got ", micro_batches);

  const Program& main = module.main_program();
  Program train("train"), optimizer("optimizer");
  train.info().kind = "forward";
  train.info().stage = 0;
  optimizer.info().kind = "optimizer";
  optimizer.info().stage = 0;
  for (const Var& v : main.vars()) {
    train.AddVar(v);
    optimizer.AddVar(v);
  }
  for (const Op& op : main.ops()) (op.role == OpRole::kOptimize ? optimizer : train).AddOp(op);

  Module out;
  out.name = module.name;
  out.mesh = module.mesh;
  out.metadata = module.metadata;
  out.AddProgram(std::move(train));
  bool has_optimizer = !optimizer.ops().empty();
  if (has_optimizer) out.AddProgram(std::move(optimizer));

  Plan& plan = out.plan;
  plan.schedule = kSequentialSchedule;
  plan.num_micro_batches = micro_batches;
  plan.num_stages = 1;
  plan.stage_to_rank = {0};
  RankPlan rank;
  for (int mb = 0; mb < micro_batches; ++mb)
    rank.jobs.push_back(Job{JobKind::kForward, 0, mb, "train", -1, -1, {}, {}, {}});
  if (has_optimizer)
    rank.jobs.push_back(Job{JobKind::kOptimizer, 0, 0, "optimizer", -1, -1, {}, {}, {}});
  plan.ranks.push_back(std::move(rank));
  return out;
}

std::string ScheduleOf(const Module& module) {
  return module.plan.empty() ? kSequentialSchedule : module.plan.schedule;
}

}  // namespace pw
