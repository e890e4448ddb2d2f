#include "executor/plan_check.h"

#include <map>
#include <tuple>

#include "executor/instr.h"
#include "ir/p2p_vars.h"

namespace pw {
namespace {

// (from, to, backward, micro-batch, vars) of one transfer.
using TransferKey = std::tuple<int, int, bool, int, std::vector<std::string>>;

struct Transfer {
  int sends = 0;
  int recvs = 0;
  std::string example;  // a job naming it, for the message
};

}  // namespace

Status CheckPlan(const Module& module) {
  const Plan& plan = module.plan;
  if (plan.empty()) return FailedPrecondition("module has no plan");
  if (plan.num_micro_batches < 1)
    return FailedPrecondition("plan has ", plan.num_micro_batches, " micro-batches");
  std::map<TransferKey, Transfer> transfers;
  for (const RankPlan& rank_plan : plan.ranks) {
    std::vector<const Job*> jobs;
    FlattenJobs(rank_plan.jobs, jobs);
    for (const Job* job : jobs) {
      std::string where = StrCat("plan: pipeline rank ", rank_plan.rank, " job ", JobName(*job));
      bool step_level = job->kind == JobKind::kOptimizer;
      if (!step_level && (job->micro_batch < 0 || job->micro_batch >= plan.num_micro_batches))
        return FailedPrecondition(where, ": micro-batch ", job->micro_batch, " is outside [0, ",
                                  plan.num_micro_batches, ")");
      if (!IsP2pJob(job->kind)) {
        if (job->program.empty()) return FailedPrecondition(where, ": names no program");
        if (!module.FindProgram(job->program))
          return FailedPrecondition(where, ": no program named '", job->program, "'");
        continue;
      }
      if (job->peer < 0 || job->peer >= module.mesh.pp || job->peer == rank_plan.rank)
        return FailedPrecondition(where, ": peer ", job->peer, " is not another pipeline rank");
      auto vars = P2pVars(module, rank_plan.rank, *job);
      if (!vars.ok()) return vars.status().WithContext("plan");
      bool send = IsSendJob(job->kind);
      int from = send ? rank_plan.rank : job->peer;
      int to = send ? job->peer : rank_plan.rank;
      Transfer& t = transfers[{from, to, IsBackwardP2p(job->kind), job->micro_batch, *vars}];
      (send ? t.sends : t.recvs)++;
      if (t.example.empty()) t.example = where;
    }
  }
  for (const auto& [key, t] : transfers) {
    const auto& [from, to, backward, mb, vars] = key;
    if (t.sends == t.recvs) continue;
    std::string what = StrCat(backward ? "_B" : "_F", " of micro-batch ", mb, " (", vars.front(),
                              vars.size() > 1 ? StrCat(" and ", vars.size() - 1, " more") : "",
                              ") from pipeline rank ", from, " to ", to);
    if (t.sends > t.recvs)
      return FailedPrecondition(t.example, ": SEND", what, " has no matching RECV",
                                backward ? "_B" : "_F", " on pipeline rank ", to);
    return FailedPrecondition(t.example, ": RECV", what, " has no matching SEND",
                              backward ? "_B" : "_F", " on pipeline rank ", from);
  }
  return OkStatus();
}

namespace {

// Lowers without a device: no streams run, kernels are not looked up.
class ValidationBackend final : public Backend {
 public:
  std::string_view name() const override { return "validation"; }
  StatusOr<Stream*> GetStream(StreamType) override {
    return FailedPrecondition("the validation backend runs nothing");
  }
  std::unique_ptr<Event> CreateEvent() override { return std::make_unique<NoEvent>(); }
  Status Prepare(Instr&) override { return OkStatus(); }

 private:
  struct NoEvent final : Event {
    void Reset() override {}
  };
};

}  // namespace

Status CheckPlanForAllRanks(const Module& module, const LoweringOptions& options) {
  PW_RETURN_IF_ERROR(CheckPlan(module));
  ValidationBackend backend;
  for (int rank = 0; rank < module.mesh.world_size(); ++rank) {
    MemoryTracker memory;
    PW_RETURN_IF_ERROR(LowerRankPlan(module, rank, backend, memory, options).status());
  }
  return OkStatus();
}

}  // namespace pw
