#include "cost_model/plan_rules.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <set>

#include "ir/plan_actions.h"

namespace pw::cost {

RankCoord CoordOf(const Mesh& mesh, int rank) {
  RankCoord c;
  c.mp = rank % mesh.mp;
  c.dp = (rank / mesh.mp) % mesh.dp;
  c.pp = rank / (mesh.mp * mesh.dp);
  return c;
}

int RankOf(const Mesh& mesh, const RankCoord& c) {
  return c.pp * (mesh.dp * mesh.mp) + c.dp * mesh.mp + c.mp;
}

std::vector<int> GroupOf(const Mesh& mesh, const std::string& kind, int rank) {
  RankCoord c = CoordOf(mesh, rank);
  std::vector<int> group;
  if (kind == "mp") {
    for (c.mp = 0; c.mp < mesh.mp; ++c.mp) group.push_back(RankOf(mesh, c));
  } else if (kind == "dp") {
    for (c.dp = 0; c.dp < mesh.dp; ++c.dp) group.push_back(RankOf(mesh, c));
  } else if (kind == "pp") {
    for (c.pp = 0; c.pp < mesh.pp; ++c.pp) group.push_back(RankOf(mesh, c));
  }
  return group;
}

StatusOr<EventRef> ParseEventRef(std::string_view text) {
  EventRef ref;
  size_t at = text.rfind('@');
  ref.name = std::string(text.substr(0, at));
  if (ref.name.empty()) return InvalidArgument("event reference '", text, "' has no name");
  if (at == std::string_view::npos) return ref;
  std::string_view suffix = text.substr(at + 1);
  bool sign = !suffix.empty() && (suffix[0] == '+' || suffix[0] == '-');
  std::string_view digits = sign ? suffix.substr(1) : suffix;
  int value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return InvalidArgument("event reference '", text,
                           "': expected NAME, NAME@+K, NAME@-K or NAME@K after '@'");
  ref.relative = sign;
  ref.offset = sign && suffix[0] == '-' ? -value : value;
  return ref;
}

bool IsP2pJob(JobKind kind) {
  return kind == JobKind::kSendF || kind == JobKind::kRecvF || kind == JobKind::kSendB ||
         kind == JobKind::kRecvB;
}
bool IsSendJob(JobKind kind) { return kind == JobKind::kSendF || kind == JobKind::kSendB; }
bool IsBackwardP2p(JobKind kind) { return kind == JobKind::kSendB || kind == JobKind::kRecvB; }

namespace {

bool MatchesDirection(const Program& p, bool backward) {
  const std::string& k = p.info().kind;
  if (k.empty()) return true;
  return backward ? (k == "backward" || k == "backward_input" || k == "backward_weight")
                  : k == "forward";
}

std::set<std::string> Written(const Program& p) {
  std::set<std::string> out;
  for (const Op& op : p.ops()) op.ForEachOutput([&](const std::string& v) { out.insert(v); });
  return out;
}

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

}  // namespace

int ProgramPipelineRank(const Module& module, const Program& program) {
  int stage = std::max(0, program.info().stage);
  const std::vector<int>& map = module.plan.stage_to_rank;
  if (stage < static_cast<int>(map.size())) return map[stage];
  return stage % std::max(1, module.mesh.pp);
}

StatusOr<std::vector<std::string>> P2pVars(const Module& module, int pipeline_rank,
                                           const Job& job) {
  bool backward = IsBackwardP2p(job.kind);
  bool send = IsSendJob(job.kind);
  std::vector<const Program*> own, peer;
  if (!job.program.empty()) {
    const Program* p = module.FindProgram(job.program);
    if (!p) return NotFound(JobToString(job), ": no program named '", job.program, "'");
    own.push_back(p);
  }
  for (const Program& p : module.programs()) {
    if (!MatchesDirection(p, backward)) continue;
    int rank = ProgramPipelineRank(module, p);
    if (job.program.empty() && rank == pipeline_rank) own.push_back(&p);
    if (rank == job.peer) peer.push_back(&p);
  }
  std::set<std::string> mine, theirs;
  for (const Program* p : own) {
    for (const std::string& v : send ? Written(*p) : ReadFromOutside(*p)) {
      const Var* var = p->FindVar(v);
      if (!(var && var->persistable)) mine.insert(v);
    }
  }
  for (const Program* p : peer) {
    std::set<std::string> s = send ? ReadFromOutside(*p) : Written(*p);
    theirs.insert(s.begin(), s.end());
  }
  std::vector<std::string> vars;
  std::set_intersection(mine.begin(), mine.end(), theirs.begin(), theirs.end(),
                        std::back_inserter(vars));
  if (vars.empty())
    return FailedPrecondition(JobToString(job), " on pipeline rank ", pipeline_rank,
                              ": no var crosses to pipeline rank ", job.peer);
  return vars;
}

}  // namespace pw::cost
