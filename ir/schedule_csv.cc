#include "ir/schedule_csv.h"

#include <algorithm>
#include <tuple>

#include "ir/file_util.h"

namespace pw {

StatusOr<ActionSchedule> ParseScheduleCsv(std::string_view text) {
  ActionSchedule schedule;
  int line = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view row = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    std::vector<Action>& actions = schedule.ranks.emplace_back();
    if (row.empty()) continue;  // a rank with nothing to do
    int cell = 0;
    while (true) {
      size_t comma = row.find(',');
      ++cell;
      StatusOr<Action> a = ParseAction(row.substr(0, comma), schedule);
      if (!a.ok()) return a.status().WithContext(StrCat("line ", line, ", cell ", cell));
      actions.push_back(*a);
      if (comma == std::string_view::npos) break;
      row.remove_prefix(comma + 1);
    }
  }
  if (schedule.ranks.empty()) return InvalidArgument("schedule CSV has no rows");
  PW_RETURN_IF_ERROR(InferScheduleShape(schedule));
  return schedule;
}

StatusOr<ActionSchedule> ReadScheduleCsv(const std::string& path) {
  PW_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  StatusOr<ActionSchedule> schedule = ParseScheduleCsv(text);
  if (!schedule.ok()) return schedule.status().WithContext(path);
  return schedule;
}

std::string ScheduleToCsv(const ActionSchedule& schedule) {
  std::string out;
  out.reserve(schedule.num_actions() * 7);
  for (const auto& actions : schedule.ranks) {
    // An empty line is a rank with no actions; a rank whose one action is idle prints as
    // one quoted empty cell, as Python's csv writer does, so reading gives it back.
    if (actions.size() == 1 && actions[0].type == ActionType::kIdle) {
      out += "\"\"\n";
      continue;
    }
    for (size_t i = 0; i < actions.size(); ++i) {
      if (i) out += ',';
      AppendAction(out, actions[i], schedule);
    }
    out += '\n';
  }
  return out;
}

Status InferScheduleShape(ActionSchedule& schedule) {
  int max_stage = -1, max_mb = -1;
  int64_t parts = 0;  // actions, a merged one counting each of its parts
  std::vector<StageEdge> skips;
  auto visit = [&](const Action& a) {
    ++parts;
    max_stage = std::max<int>(max_stage, a.stage);
    max_mb = std::max<int>(max_mb, a.micro_batch);
    if (a.peer < 0) return;
    max_stage = std::max<int>(max_stage, a.peer);
    bool forward = a.type == ActionType::kSendF || a.type == ActionType::kRecvB;
    StageEdge e = forward ? StageEdge{a.stage, a.peer} : StageEdge{a.peer, a.stage};
    if (std::find(skips.begin(), skips.end(), e) == skips.end()) skips.push_back(e);
  };
  for (const auto& actions : schedule.ranks)
    for (const Action& a : actions) {
      if (a.type == ActionType::kIdle) continue;
      for (const Action& p : schedule.Parts(a)) visit(p);
    }
  if (max_stage < 0) return InvalidArgument("schedule has no actions");
  // Every stage and every micro-batch has actions, so neither index can pass their count:
  // a larger one is a gap, refused before tables are sized by it.
  if (const bool mb_gap = max_mb >= parts; mb_gap || max_stage >= parts)
    return InvalidArgument(mb_gap ? "micro-batch " : "stage ", mb_gap ? max_mb : max_stage,
                           " in a schedule of ", parts,
                           " actions: stages and micro-batches are numbered from 0 without gaps");
  std::vector<int> owner(max_stage + 1, -1);
  for (int r = 0; r < schedule.num_ranks(); ++r)
    for (const Action& a : schedule.ranks[r]) {
      if (a.type == ActionType::kIdle) continue;
      for (const Action& p : schedule.Parts(a)) {
        if (owner[p.stage] == -1) owner[p.stage] = r;
        if (owner[p.stage] != r)
          return InvalidArgument("inconsistent ranks: stage ", p.stage, " runs on rank ",
                                 owner[p.stage], " and on rank ", r, " (",
                                 ActionToString(p, schedule), ")");
      }
    }
  for (int s = 0; s <= max_stage; ++s)
    if (owner[s] < 0) return InvalidArgument("stage ", s, " has no actions on any rank");
  for (const StageEdge& e : skips)
    if (e.dst <= e.src)
      return InvalidArgument("a send/recv peer must be a later stage for F and an earlier ",
                             "stage for B (edge ", e.src, "->", e.dst, ")");
  std::erase_if(skips, [](const StageEdge& e) { return e.dst == e.src + 1; });
  std::sort(skips.begin(), skips.end(),
            [](auto& a, auto& b) { return std::tie(a.src, a.dst) < std::tie(b.src, b.dst); });
  schedule.num_stages = max_stage + 1;
  schedule.num_micro_batches = max_mb + 1;
  schedule.stage_to_rank = std::move(owner);
  schedule.skip_edges = std::move(skips);
  return OkStatus();
}

}  // namespace pw
