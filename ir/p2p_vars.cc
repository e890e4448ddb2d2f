#include "ir/p2p_vars.h"

#include <algorithm>
#include <set>

#include "ir/plan_actions.h"

namespace pw {
namespace {

bool IsForwardKind(const std::string& kind) { return kind.empty() || kind == "forward"; }
bool IsBackwardKind(const std::string& kind) {
  return kind.empty() || kind == "backward" || kind == "backward_input" ||
         kind == "backward_weight";
}

bool MatchesDirection(const Program& p, bool backward) {
  return backward ? IsBackwardKind(p.info().kind) : IsForwardKind(p.info().kind);
}

std::set<std::string> Written(const Program& p) {
  std::set<std::string> out;
  for (const Op& op : p.ops()) op.ForEachOutput([&](const std::string& v) { out.insert(v); });
  return out;
}

bool IsPersistable(const Program& p, const std::string& v) {
  const Var* var = p.FindVar(v);
  return var && var->persistable;
}

}  // namespace

std::set<std::string> ReadFromOutside(const Program& p) {
  std::set<std::string> written, out;
  for (const Op& op : p.ops()) {
    op.ForEachInput([&](const std::string& v) {
      if (!written.count(v)) out.insert(v);
    });
    op.ForEachOutput([&](const std::string& v) { written.insert(v); });
  }
  return out;
}

bool IsP2pJob(JobKind kind) {
  return kind == JobKind::kSendF || kind == JobKind::kRecvF || kind == JobKind::kSendB ||
         kind == JobKind::kRecvB;
}
bool IsSendJob(JobKind kind) { return kind == JobKind::kSendF || kind == JobKind::kSendB; }
bool IsBackwardP2p(JobKind kind) { return kind == JobKind::kSendB || kind == JobKind::kRecvB; }

int ProgramPipelineRank(const Module& module, const Program& program) {
  int stage = std::max(0, program.info().stage);
  const std::vector<int>& map = module.plan.stage_to_rank;
  if (stage < static_cast<int>(map.size())) return map[stage];
  return stage % std::max(1, module.mesh.pp);
}

namespace {

bool IsDirection(JobKind kind, bool backward) {
  return backward ? kind == JobKind::kBackward || kind == JobKind::kBackwardInput ||
                        kind == JobKind::kBackwardWeight
                  : kind == JobKind::kForward;
}

void CollectPrograms(const Module& module, const std::vector<Job>& jobs, int stage, bool backward,
                     std::set<const Program*>& out) {
  for (const Job& j : jobs) {
    // A split B names no program: its I and W sub-jobs do.
    if (!j.sub_jobs.empty()) CollectPrograms(module, j.sub_jobs, stage, backward, out);
    if (j.stage != stage || !IsDirection(j.kind, backward) || j.program.empty()) continue;
    if (const Program* p = module.FindProgram(j.program)) out.insert(p);
  }
}

// The programs the compute jobs of `stage` on pipeline rank `rank` run.
std::set<const Program*> StagePrograms(const Module& module, int rank, int stage, bool backward) {
  std::set<const Program*> out;
  for (const RankPlan& r : module.plan.ranks)
    if (r.rank == rank) CollectPrograms(module, r.jobs, stage, backward, out);
  return out;
}

}  // namespace

int PeerStage(const Job& job) {
  if (job.peer_stage >= 0) return job.peer_stage;
  bool toward_later = job.kind == JobKind::kSendF || job.kind == JobKind::kRecvB;
  return toward_later ? job.stage + 1 : job.stage - 1;
}

StatusOr<std::vector<std::string>> P2pVars(const Module& module, int pipeline_rank,
                                           const Job& job) {
  const bool backward = IsBackwardP2p(job.kind);
  const bool send = IsSendJob(job.kind);
  std::set<const Program*> own = StagePrograms(module, pipeline_rank, job.stage, backward);
  std::set<const Program*> peer = StagePrograms(module, job.peer, PeerStage(job), backward);
  if (!job.program.empty()) {
    const Program* p = module.FindProgram(job.program);
    if (!p) return NotFound(JobName(job), ": no program named '", job.program, "'");
    own = {p};
  }
  if (own.empty() || peer.empty()) {
    // A plan without compute jobs to go by: use the programs' own placement.
    for (const Program& p : module.programs()) {
      if (!MatchesDirection(p, backward)) continue;
      int rank = ProgramPipelineRank(module, p);
      if (job.program.empty() && rank == pipeline_rank && own.empty()) own.insert(&p);
      if (rank == job.peer && peer.empty()) peer.insert(&p);
    }
  }

  std::set<std::string> mine, theirs;
  for (const Program* p : own) {
    std::set<std::string> s = send ? Written(*p) : ReadFromOutside(*p);
    for (const std::string& v : s)
      if (!IsPersistable(*p, v)) mine.insert(v);
  }
  for (const Program* p : peer) {
    std::set<std::string> s = send ? ReadFromOutside(*p) : Written(*p);
    theirs.insert(s.begin(), s.end());
  }
  std::vector<std::string> vars;
  std::set_intersection(mine.begin(), mine.end(), theirs.begin(), theirs.end(),
                        std::back_inserter(vars));
  if (vars.empty())
    return FailedPrecondition(JobName(job), " on pipeline rank ", pipeline_rank,
                              ": no var crosses to stage ", PeerStage(job), " on pipeline rank ",
                              job.peer);
  return vars;
}

uint64_t P2pTag(bool backward, int micro_batch, const std::string& var) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](uint8_t byte) {
    h ^= byte;
    h *= 1099511628211ull;
  };
  mix(backward ? 'B' : 'F');
  for (int i = 0; i < 4; ++i) mix(static_cast<uint8_t>(micro_batch >> (8 * i)));
  for (char c : var) mix(static_cast<uint8_t>(c));
  return h >> 1;
}

std::string JobName(const Job& job) { return JobToString(job); }

}  // namespace pw
