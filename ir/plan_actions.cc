#include "ir/plan_actions.h"

#include <algorithm>

#include "ir/schedule_csv.h"

namespace pw {

JobKind JobKindOf(ActionType type) {
  switch (type) {
    case ActionType::kIdle:
      return JobKind::kUnknown;
    case ActionType::kForward:
      return JobKind::kForward;
    case ActionType::kBackward:
      return JobKind::kBackward;
    case ActionType::kBackwardInput:
      return JobKind::kBackwardInput;
    case ActionType::kBackwardWeight:
      return JobKind::kBackwardWeight;
    case ActionType::kSendF:
      return JobKind::kSendF;
    case ActionType::kRecvF:
      return JobKind::kRecvF;
    case ActionType::kSendB:
      return JobKind::kSendB;
    case ActionType::kRecvB:
      return JobKind::kRecvB;
    case ActionType::kOverlapFB:
      return JobKind::kOverlapFB;
    case ActionType::kBatchP2P:
      return JobKind::kBatchP2P;
  }
  return JobKind::kUnknown;
}

ActionType ActionTypeOf(JobKind kind) {
  switch (kind) {
    case JobKind::kForward:
      return ActionType::kForward;
    case JobKind::kBackward:
      return ActionType::kBackward;
    case JobKind::kBackwardInput:
      return ActionType::kBackwardInput;
    case JobKind::kBackwardWeight:
      return ActionType::kBackwardWeight;
    case JobKind::kSendF:
      return ActionType::kSendF;
    case JobKind::kRecvF:
      return ActionType::kRecvF;
    case JobKind::kSendB:
      return ActionType::kSendB;
    case JobKind::kRecvB:
      return ActionType::kRecvB;
    case JobKind::kOverlapFB:
      return ActionType::kOverlapFB;
    case JobKind::kBatchP2P:
      return ActionType::kBatchP2P;
    case JobKind::kUnknown:
    case JobKind::kOptimizer:
      return ActionType::kIdle;
  }
  return ActionType::kIdle;
}

namespace {

// The stage on the other end of a send/recv.
int PeerStage(const Action& a) {
  if (a.peer >= 0) return a.peer;
  bool toward_next = a.type == ActionType::kSendF || a.type == ActionType::kRecvB;
  return toward_next ? a.stage + 1 : a.stage - 1;
}

Job MakeJob(const Action& a, const ActionSchedule& schedule, const PlanNaming& naming) {
  Job job;
  job.kind = JobKindOf(a.type);
  if (IsFused(a.type)) {
    job.stage = -1;
    job.micro_batch = -1;
    for (const Action& p : schedule.Parts(a)) job.sub_jobs.push_back(MakeJob(p, schedule, naming));
    return job;
  }
  job.stage = a.stage;
  job.micro_batch = a.micro_batch;
  if (IsComm(a.type)) {
    int peer = PeerStage(a);
    job.peer = peer >= 0 && peer < schedule.num_stages ? schedule.stage_to_rank[peer] : -1;
    job.peer_stage = a.peer;
  } else if (job.kind == JobKind::kBackward && naming.split_backward) {
    for (JobKind part : {JobKind::kBackwardInput, JobKind::kBackwardWeight}) {
      Job sub;
      sub.kind = part;
      sub.stage = a.stage;
      sub.micro_batch = a.micro_batch;
      if (naming.program) sub.program = naming.program(part, a.stage);
      job.sub_jobs.push_back(std::move(sub));
    }
  } else if (naming.program) {
    job.program = naming.program(job.kind, a.stage);
  }
  return job;
}

StatusOr<Action> ToAction(const Job& job, ActionSchedule& schedule) {
  ActionType type = ActionTypeOf(job.kind);
  if (type == ActionType::kIdle)
    return InvalidArgument("job kind ", static_cast<int>(job.kind), " has no action");
  PW_RETURN_IF_ERROR(CheckSubJobs(job));
  if (!IsFused(type)) {
    if (job.stage < 0 || job.micro_batch < 0 || job.micro_batch > kMaxActionMicroBatch)
      return InvalidArgument("job ", JobToString(job),
                             " has a negative stage or a micro-batch out of range");
    return MakeAction(type, job.stage, job.micro_batch, IsComm(type) ? job.peer_stage : -1);
  }
  std::vector<Action> parts;
  for (const Job& sub : job.sub_jobs) {
    PW_ASSIGN_OR_RETURN(Action p, ToAction(sub, schedule));
    if (IsFused(p.type)) return InvalidArgument("nested fused job ", JobToString(job));
    // The segments of one job interleaved with another's (overlap-1f1b) are one part.
    if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.push_back(p);
  }
  if (parts.empty()) return InvalidArgument("fused job without sub-jobs");
  if (!schedule.CanAddGroup()) return InvalidArgument("too many fused jobs in one plan");
  return schedule.AddGroup(type, parts);
}

}  // namespace

Status CheckSubJobs(const Job& job) {
  if (job.sub_jobs.empty()) return OkStatus();
  if (job.kind == JobKind::kOverlapFB || job.kind == JobKind::kBatchP2P) return OkStatus();
  const std::string name = JobToString(job);
  if (job.kind != JobKind::kBackward)
    return InvalidArgument("job ", name, " has sub-jobs; only fused jobs and a split B have them");
  if (!job.program.empty())
    return InvalidArgument("job ", name, " has sub-jobs and names program '", job.program,
                           "'; a split B runs its sub-jobs instead");
  const bool shaped = job.sub_jobs.size() == 2 && job.sub_jobs[0].kind == JobKind::kBackwardInput &&
                      job.sub_jobs[1].kind == JobKind::kBackwardWeight;
  if (!shaped) return InvalidArgument("job ", name, " has sub-jobs other than an I and then a W");
  for (const Job& sub : job.sub_jobs)
    if (sub.stage != job.stage || sub.micro_batch != job.micro_batch || !sub.sub_jobs.empty())
      return InvalidArgument("job ", name, ": sub-job ", JobToString(sub),
                             " is not a plain job of its stage and micro-batch");
  return OkStatus();
}

Plan ActionScheduleToPlan(const ActionSchedule& schedule, const std::string& kind,
                          const PlanNaming& naming) {
  Plan plan;
  plan.schedule = kind;
  plan.num_micro_batches = schedule.num_micro_batches;
  plan.num_stages = schedule.num_stages;
  plan.stage_to_rank = schedule.stage_to_rank;
  plan.ranks.resize(schedule.ranks.size());
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    RankPlan& rank = plan.ranks[r];
    rank.rank = r;
    rank.jobs.reserve(schedule.ranks[r].size());
    for (const Action& a : schedule.ranks[r]) {
      if (a.type != ActionType::kIdle) rank.jobs.push_back(MakeJob(a, schedule, naming));
    }
    if (!naming.optimizer_jobs || !naming.program) continue;
    for (int s = 0; s < schedule.num_stages; ++s) {
      if (schedule.stage_to_rank[s] != r) continue;
      std::string program = naming.program(JobKind::kOptimizer, s);
      if (program.empty()) continue;
      Job opt;
      opt.kind = JobKind::kOptimizer;
      opt.stage = s;
      opt.program = std::move(program);
      rank.jobs.push_back(std::move(opt));
    }
  }
  return plan;
}

StatusOr<ActionSchedule> PlanToActionSchedule(const Plan& plan) {
  ActionSchedule schedule;
  schedule.ranks.resize(plan.ranks.size());
  std::vector<bool> seen(plan.ranks.size(), false);
  for (const RankPlan& rank : plan.ranks) {
    if (rank.rank < 0 || rank.rank >= static_cast<int>(plan.ranks.size()) || seen[rank.rank])
      return InvalidArgument("plan lists rank ", rank.rank, " twice or out of range");
    seen[rank.rank] = true;
    auto& actions = schedule.ranks[rank.rank];
    actions.reserve(rank.jobs.size());
    for (const Job& job : rank.jobs) {
      if (job.kind == JobKind::kOptimizer) continue;
      StatusOr<Action> a = ToAction(job, schedule);
      if (!a.ok()) return a.status().WithContext(StrCat("rank ", rank.rank));
      actions.push_back(*a);
    }
  }
  PW_RETURN_IF_ERROR(InferScheduleShape(schedule));
  if (!plan.stage_to_rank.empty()) {
    if (plan.stage_to_rank.size() < schedule.stage_to_rank.size())
      return InvalidArgument("plan places ", plan.stage_to_rank.size(), " stages but its jobs use ",
                             schedule.stage_to_rank.size());
    for (size_t s = 0; s < schedule.stage_to_rank.size(); ++s)
      if (plan.stage_to_rank[s] != schedule.stage_to_rank[s])
        return InvalidArgument("inconsistent ranks: the plan places stage ", s, " on rank ",
                               plan.stage_to_rank[s], " but rank ", schedule.stage_to_rank[s],
                               " runs it");
    schedule.stage_to_rank = plan.stage_to_rank;
    schedule.num_stages = static_cast<int>(plan.stage_to_rank.size());
  }
  if (plan.num_micro_batches > 0) {
    if (plan.num_micro_batches < schedule.num_micro_batches)
      return InvalidArgument("plan has ", plan.num_micro_batches, " micro-batches but a job runs ",
                             "micro-batch ", schedule.num_micro_batches - 1);
    schedule.num_micro_batches = plan.num_micro_batches;
  }
  return schedule;
}

std::string JobToString(const Job& job) {
  if (job.kind == JobKind::kOptimizer) return StrCat(job.stage, "OPT");
  ActionSchedule scratch;
  ActionType type = ActionTypeOf(job.kind);
  if (type == ActionType::kIdle) return "?";
  if (!IsFused(type))
    return ActionToString(MakeAction(type, job.stage, job.micro_batch, job.peer_stage), scratch);
  // A job cut into segments interleaved with another's prints once.
  std::vector<std::string> parts;
  for (const Job& sub : job.sub_jobs) {
    std::string part = JobToString(sub);
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  }
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ";" : "") + parts[i];
  return out + ")" + ActionTypeToken(type);
}

}  // namespace pw
