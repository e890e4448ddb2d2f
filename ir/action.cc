#include "ir/action.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace pw {

size_t ActionSchedule::num_actions() const {
  size_t n = 0;
  for (const auto& r : ranks) n += r.size();
  return n;
}

Action ActionSchedule::AddGroup(ActionType type, std::span<const Action> parts) {
  if (!CanAddGroup()) {
    // Callers that take groups from input check CanAddGroup; planners stay far below.
    std::fprintf(stderr, "pipeweave: more than %d fused actions in one schedule\n",
                 kMaxActionMicroBatch + 1);
    std::abort();
  }
  Action a;
  a.type = type;
  a.stage = -1;
  a.micro_batch = static_cast<int32_t>(group_begin.size() - 1);
  group_parts.insert(group_parts.end(), parts.begin(), parts.end());
  group_begin.push_back(static_cast<uint32_t>(group_parts.size()));
  return a;
}

Status CheckScheduleShape(const ActionSchedule& s) {
  const int S = s.num_stages;
  if (S < 1 || s.num_micro_batches < 1)
    return InvalidArgument("schedule has no stages or micro-batches");
  if (static_cast<int>(s.stage_to_rank.size()) != S)
    return InvalidArgument("placement lists ", s.stage_to_rank.size(), " stages, schedule has ", S);
  for (int stage = 0; stage < S; ++stage)
    if (s.stage_to_rank[stage] < 0 || s.stage_to_rank[stage] >= s.num_ranks())
      return InvalidArgument("stage ", stage, " is placed on rank ", s.stage_to_rank[stage],
                             " but there are ", s.num_ranks(), " ranks");
  for (const StageEdge& e : s.skip_edges)
    if (e.src < 0 || e.dst >= S || e.dst <= e.src + 1)
      return InvalidArgument("bad skip edge ", e.src, "->", e.dst);
  if (s.group_begin.empty() || s.group_begin.front() != 0 ||
      s.group_begin.back() != s.group_parts.size() ||
      !std::is_sorted(s.group_begin.begin(), s.group_begin.end()))
    return InvalidArgument("fused groups do not index their ", s.group_parts.size(), " parts");
  for (const Action& p : s.group_parts)
    if (IsFused(p.type)) return InvalidArgument("a fused action inside a fused action");
  return OkStatus();
}

bool ActionSchedule::HasComms() const {
  // Without a branch per action: a compute-only schedule is scanned to its end.
  constexpr uint32_t kCommTypes =
      1u << static_cast<int>(ActionType::kSendF) | 1u << static_cast<int>(ActionType::kRecvF) |
      1u << static_cast<int>(ActionType::kSendB) | 1u << static_cast<int>(ActionType::kRecvB) |
      1u << static_cast<int>(ActionType::kBatchP2P);
  for (const auto& r : ranks) {
    uint32_t found = 0;
    for (const Action& a : r) found |= kCommTypes >> static_cast<int>(a.type);
    if (found & 1) return true;
  }
  return false;
}

// Group indices may differ between two equal schedules, so fused actions compare by parts.
bool ActionSchedule::operator==(const ActionSchedule& o) const {
  if (num_stages != o.num_stages || num_micro_batches != o.num_micro_batches ||
      stage_to_rank != o.stage_to_rank || ranks.size() != o.ranks.size() ||
      skip_edges != o.skip_edges)
    return false;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].size() != o.ranks[r].size()) return false;
    for (size_t i = 0; i < ranks[r].size(); ++i) {
      const Action& a = ranks[r][i];
      const Action& b = o.ranks[r][i];
      if (a.type != b.type) return false;
      if (!IsFused(a.type)) {
        if (!(a == b)) return false;
        continue;
      }
      auto pa = Parts(a);
      auto pb = o.Parts(b);
      if (!std::equal(pa.begin(), pa.end(), pb.begin(), pb.end())) return false;
    }
  }
  return true;
}

StatusOr<StagePlacement> ParseStagePlacement(std::string_view name) {
  if (name == "loop") return StagePlacement::kLoop;
  if (name == "v") return StagePlacement::kV;
  return InvalidArgument("unknown placement '", name, "' (use loop or v)");
}

const char* StagePlacementName(StagePlacement placement) {
  return placement == StagePlacement::kV ? "v" : "loop";
}

int RankOfStage(StagePlacement placement, int stage, int num_ranks) {
  const int chunk = stage / num_ranks, pos = stage % num_ranks;
  return placement == StagePlacement::kV && chunk % 2 == 1 ? num_ranks - 1 - pos : pos;
}

std::vector<int> PlaceStages(StagePlacement placement, int num_stages, int num_ranks) {
  std::vector<int> ranks(num_stages);
  for (int s = 0; s < num_stages; ++s) ranks[s] = RankOfStage(placement, s, num_ranks);
  return ranks;
}

const char* ActionTypeToken(ActionType type) {
  switch (type) {
    case ActionType::kIdle:
      return "";
    case ActionType::kForward:
      return "F";
    case ActionType::kBackward:
      return "B";
    case ActionType::kBackwardInput:
      return "I";
    case ActionType::kBackwardWeight:
      return "W";
    case ActionType::kSendF:
      return "SEND_F";
    case ActionType::kRecvF:
      return "RECV_F";
    case ActionType::kSendB:
      return "SEND_B";
    case ActionType::kRecvB:
      return "RECV_B";
    case ActionType::kOverlapFB:
      return "OVERLAP_F_B";
    case ActionType::kBatchP2P:
      return "BATCH_P2P";
  }
  return "?";
}

namespace {

void AppendInt(std::string& out, int value) {
  char buf[16];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, end);
}

void AppendSimple(std::string& out, const Action& a) {
  if (a.type == ActionType::kIdle) return;
  AppendInt(out, a.stage);
  out += ActionTypeToken(a.type);
  AppendInt(out, a.micro_batch);
  if (a.peer >= 0) {
    // Direction of the data: '>' to the peer, '<' from it.
    bool outgoing = a.type == ActionType::kSendF || a.type == ActionType::kSendB;
    out += outgoing ? '>' : '<';
    AppendInt(out, a.peer);
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool ParseInt(std::string_view& s, int& value) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr == s.data()) return false;
  s.remove_prefix(ptr - s.data());
  return true;
}

constexpr const char* kExpectedForm =
    "expected {stage}{F|B|I|W}{micro-batch}, {stage}{SEND_F|RECV_F|SEND_B|RECV_B}"
    "{micro-batch} or (A;B)OVERLAP_F_B";

Status Malformed(std::string_view cell, std::string_view why) {
  return InvalidArgument("malformed action '", cell, "': ", why);
}

StatusOr<Action> ParseSimple(std::string_view cell) {
  std::string_view s = cell;
  int stage = 0;
  if (!ParseInt(s, stage)) return Malformed(cell, kExpectedForm);
  if (stage < 0 || stage > INT16_MAX) return Malformed(cell, "stage out of range");
  // Longest tokens first: "SEND_F" must not be read as something shorter.
  static constexpr struct {
    std::string_view token;
    ActionType type;
  } kTokens[] = {{"SEND_F", ActionType::kSendF},    {"RECV_F", ActionType::kRecvF},
                 {"SEND_B", ActionType::kSendB},    {"RECV_B", ActionType::kRecvB},
                 {"F", ActionType::kForward},       {"B", ActionType::kBackward},
                 {"I", ActionType::kBackwardInput}, {"W", ActionType::kBackwardWeight}};
  ActionType type = ActionType::kIdle;
  for (const auto& t : kTokens) {
    if (s.starts_with(t.token)) {
      type = t.type;
      s.remove_prefix(t.token.size());
      break;
    }
  }
  if (type == ActionType::kIdle) {
    if (s.starts_with("UNSHARD") || s.starts_with("RESHARD") || s.starts_with("REDUCE_GRAD"))
      return Malformed(cell, "FSDP and gradient-reduction actions are not modelled");
    return Malformed(cell, kExpectedForm);
  }
  int mb = 0;
  if (!ParseInt(s, mb) || mb < 0) return Malformed(cell, "missing micro-batch number");
  if (mb > kMaxActionMicroBatch) return Malformed(cell, "micro-batch number out of range");
  int peer = -1;
  if (!s.empty() && IsComm(type)) {
    bool outgoing = type == ActionType::kSendF || type == ActionType::kSendB;
    if (s.front() != (outgoing ? '>' : '<'))
      return Malformed(cell, outgoing ? "a send's peer is written '>stage'"
                                      : "a recv's peer is written '<stage'");
    s.remove_prefix(1);
    if (!ParseInt(s, peer) || peer < 0 || peer > INT16_MAX)
      return Malformed(cell, "bad peer stage");
  }
  if (!s.empty()) return Malformed(cell, "trailing characters");
  return MakeAction(type, stage, mb, peer);
}

}  // namespace

void AppendAction(std::string& out, const Action& a, const ActionSchedule& schedule) {
  if (!IsFused(a.type)) return AppendSimple(out, a);
  out += '(';
  bool first = true;
  for (const Action& p : schedule.Parts(a)) {
    if (!first) out += ';';
    first = false;
    AppendSimple(out, p);
  }
  out += ')';
  out += ActionTypeToken(a.type);
}

std::string ActionToString(const Action& a, const ActionSchedule& schedule) {
  std::string out;
  AppendAction(out, a, schedule);
  return out;
}

StatusOr<Action> ParseAction(std::string_view raw, ActionSchedule& schedule) {
  std::string_view cell = Trim(raw);
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') {
    cell = Trim(cell.substr(1, cell.size() - 2));
  }
  if (cell.empty()) return Action{};
  if (cell.front() != '(') return ParseSimple(cell);

  size_t close = cell.find(')');
  if (close == std::string_view::npos) return Malformed(cell, "unclosed '('");
  std::string_view kind = cell.substr(close + 1);
  ActionType type;
  if (kind == "OVERLAP_F_B") {
    type = ActionType::kOverlapFB;
  } else if (kind == "BATCH_P2P") {
    type = ActionType::kBatchP2P;
  } else {
    return Malformed(cell, "a fused action ends in OVERLAP_F_B or BATCH_P2P");
  }
  std::vector<Action> parts;
  std::string_view inner = cell.substr(1, close - 1);
  while (!inner.empty()) {
    size_t semi = inner.find(';');
    std::string_view piece = Trim(inner.substr(0, semi));
    if (!piece.empty()) {
      StatusOr<Action> part = ParseSimple(piece);
      if (!part.ok()) return part.status();
      bool fits = type == ActionType::kOverlapFB ? IsCompute(part->type) : IsComm(part->type);
      if (!fits)
        return Malformed(cell, type == ActionType::kOverlapFB
                                   ? "OVERLAP_F_B joins compute actions only"
                                   : "BATCH_P2P joins sends and recvs only");
      parts.push_back(*part);
    }
    if (semi == std::string_view::npos) break;
    inner.remove_prefix(semi + 1);
  }
  if (parts.empty()) return Malformed(cell, "empty fused action");
  if (!schedule.CanAddGroup()) return Malformed(cell, "too many fused actions in one schedule");
  return schedule.AddGroup(type, parts);
}

}  // namespace pw
