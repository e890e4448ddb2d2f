// Cost-aware schedules by list scheduling, in the spirit of the Zero Bubble paper's
// heuristic. Whenever a rank is free it runs, among the actions that are ready: an input
// gradient I (it unblocks the previous stage and frees memory), else a forward if the
// memory limit allows one more micro-batch, else a deferred weight gradient W, which fills
// what would otherwise be a bubble. zb-h2 is this with 2P M_B per rank; zb-auto tries
// variants of the rules and keeps the one with the lowest makespan.

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>

#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline {

namespace {

constexpr double kUnknown = -1;
constexpr double kNever = std::numeric_limits<double>::infinity();

struct GreedyRules {
  double mem_limit = 0;          // M_B per rank
  bool input_grad_first = true;  // prefer a ready I over a ready F
  // When > 0, stage s keeps at most factor*(P-s) - (factor-1) forwards in flight on top of
  // the memory limit (1: 1F1B's warm-up, 2: eager 1F1B's).
  int warmup_factor = 0;
  // Run a W in a gap only when nothing becomes ready within w_gap W-costs.
  double w_gap = 0;
};

struct GreedyResult {
  ActionSchedule schedule;
  double cost = 0;  // longest per-rank span
  double peak = 0;  // largest per-rank memory, M_B
};

class ListScheduler {
 public:
  ListScheduler(const ScheduleSpec& spec, const GreedyRules& rules)
      : spec_(spec),
        rules_(rules),
        S_(spec.num_stages),
        M_(spec.num_micro_batches),
        R_(spec.num_ranks),
        costs_(spec.costs) {}

  StatusOr<GreedyResult> Run() {
    GreedyResult result;
    result.schedule = EmptySchedule(spec_);
    rank_of_ = result.schedule.stage_to_rank;
    stages_of_.assign(R_, {});
    // Later stages first: on a rank with several, that pushes micro-batches deeper.
    for (int s = S_ - 1; s >= 0; --s) stages_of_[rank_of_[s]].push_back(s);
    f_end_.assign(static_cast<size_t>(S_) * M_, kUnknown);
    i_end_.assign(static_cast<size_t>(S_) * M_, kUnknown);
    next_f_.assign(S_, 0);
    next_i_.assign(S_, 0);
    ranks_.assign(R_, RankState{});
    for (int r = 0; r < R_; ++r) {
      result.schedule.ranks[r].reserve(3 * stages_of_[r].size() * static_cast<size_t>(M_));
      Wake(r, 0);
    }
    size_t remaining = 3 * static_cast<size_t>(S_) * M_;
    while (remaining > 0) {
      if (heap_.empty())
        return FailedPrecondition("no schedule fits the memory limit of ", rules_.mem_limit,
                                  " M_B per rank");
      auto [neg_time, r] = heap_.top();
      heap_.pop();
      RankState& rank = ranks_[r];
      if (!rank.queued || -neg_time != rank.free_at) continue;  // superseded entry
      rank.queued = false;
      if (Step(r, result.schedule.ranks[r])) --remaining;
    }
    for (const RankState& rank : ranks_) {
      result.cost = std::max(result.cost, rank.last_end - rank.first_start);
      result.peak = std::max(result.peak, rank.peak);
    }
    return result;
  }

 private:
  struct RankState {
    double free_at = 0;
    bool queued = false;
    double idle_since = 0;  // when it last found nothing to do (or its busy end)
    double first_start = kNever, last_end = 0;
    double mem = 0, peak = 0;
    std::deque<std::pair<int, int>> pending_w;  // (stage, micro-batch) whose W is due
  };

  double Cross(int a, int b) const { return rank_of_[a] == rank_of_[b] ? 0 : costs_.comm; }

  // When the next F / I of stage s can start, kNever while that is not known yet.
  double ReadyF(int s) const {
    int m = next_f_[s];
    if (m >= M_) return kNever;
    if (s == 0) return 0;
    double end = f_end_[static_cast<size_t>(s - 1) * M_ + m];
    return end == kUnknown ? kNever : end + Cross(s - 1, s);
  }
  double ReadyI(int s) const {
    int m = next_i_[s];
    if (m >= next_f_[s]) return kNever;  // its forward has not run yet
    size_t own = static_cast<size_t>(s) * M_ + m;
    if (s == S_ - 1) return f_end_[own];
    double end = i_end_[own + M_];
    return end == kUnknown ? kNever : std::max(end + Cross(s + 1, s), f_end_[own]);
  }

  bool ForwardAllowed(int r, int s) const {
    if (ranks_[r].mem + 1 > rules_.mem_limit + 1e-9) return false;
    if (rules_.warmup_factor > 0) {
      int k = rules_.warmup_factor;
      int cap = k * (R_ - rank_of_[s]) - (k - 1);
      if (next_f_[s] - next_i_[s] >= std::max(1, cap)) return false;
    }
    return true;
  }

  void Wake(int r, double t) {
    ranks_[r].free_at = t;
    ranks_[r].queued = true;
    heap_.emplace(-t, r);
  }

  // Something on `stage` becomes ready at `ready`: look at its rank again then if it is
  // waiting for work.
  void Notify(int stage, double ready) {
    int q = rank_of_[stage];
    RankState& rank = ranks_[q];
    double t = std::max(ready, rank.idle_since);
    if (!rank.queued || t < rank.free_at) Wake(q, t);
  }

  bool Step(int r, std::vector<Action>& out) {
    RankState& rank = ranks_[r];
    const double t = rank.free_at;
    int best_i = -1, best_f = -1;
    double next_known = kNever;
    for (int s : stages_of_[r]) {
      double ri = ReadyI(s);
      if (ri <= t) {
        if (best_i < 0 || ri < ReadyI(best_i)) best_i = s;
      } else {
        next_known = std::min(next_known, ri);
      }
      double rf = ReadyF(s);
      if (!ForwardAllowed(r, s)) continue;
      if (rf <= t) {
        if (best_f < 0) best_f = s;
      } else {
        next_known = std::min(next_known, rf);
      }
    }
    const double w_cost = costs_.weight;
    if (best_i >= 0 && (rules_.input_grad_first || best_f < 0)) {
      int m = next_i_[best_i]++;
      double end = Run(r, ActionType::kBackwardInput, best_i, m, t, out);
      i_end_[static_cast<size_t>(best_i) * M_ + m] = end;
      rank.mem -= 1 - costs_.w_mem;
      rank.pending_w.emplace_back(best_i, m);
      if (best_i > 0) Notify(best_i - 1, end + Cross(best_i, best_i - 1));
      return true;
    }
    if (best_f >= 0) {
      int m = next_f_[best_f]++;
      double end = Run(r, ActionType::kForward, best_f, m, t, out);
      f_end_[static_cast<size_t>(best_f) * M_ + m] = end;
      rank.mem += 1;
      rank.peak = std::max(rank.peak, rank.mem);
      if (best_f + 1 < S_) Notify(best_f + 1, end + Cross(best_f, best_f + 1));
      return true;
    }
    if (!rank.pending_w.empty() && next_known - t >= rules_.w_gap * w_cost) {
      auto [s, m] = rank.pending_w.front();
      rank.pending_w.pop_front();
      Run(r, ActionType::kBackwardWeight, s, m, t, out);
      rank.mem -= costs_.w_mem;
      return true;
    }
    rank.idle_since = t;
    if (next_known < kNever) Wake(r, next_known);
    return false;
  }

  double Run(int r, ActionType type, int s, int m, double t, std::vector<Action>& out) {
    RankState& rank = ranks_[r];
    double end = t + costs_.Of(type, s);
    out.push_back(MakeAction(type, s, m));
    rank.first_start = std::min(rank.first_start, t);
    rank.last_end = end;
    rank.idle_since = end;
    Wake(r, end);
    return end;
  }

  const ScheduleSpec& spec_;
  GreedyRules rules_;
  const int S_, M_, R_;
  const ActionCosts& costs_;
  std::vector<int> rank_of_;
  std::vector<std::vector<int>> stages_of_;
  std::vector<double> f_end_, i_end_;
  std::vector<int> next_f_, next_i_;
  std::vector<RankState> ranks_;
  std::priority_queue<std::pair<double, int>> heap_;  // (-free time, rank)
};

double DefaultMemLimit(const ScheduleSpec& spec) {
  return spec.mem_limit > 0 ? spec.mem_limit : spec.num_stages;
}

}  // namespace

StatusOr<ActionSchedule> GenerateZbH2(const ScheduleSpec& spec) {
  GreedyRules rules;
  rules.mem_limit = spec.mem_limit > 0 ? spec.mem_limit : 2 * spec.num_ranks;
  rules.warmup_factor = 2;
  PW_ASSIGN_OR_RETURN(GreedyResult result, ListScheduler(spec, rules).Run());
  return std::move(result.schedule);
}

StatusOr<ActionSchedule> GenerateZbAuto(const ScheduleSpec& spec) {
  const double limit = DefaultMemLimit(spec);
  if (limit < 1) return InvalidArgument("mem-limit ", limit, " is below one micro-batch (1 M_B)");
  std::optional<GreedyResult> best;
  Status last_error;
  for (int warmup : {0, 1, 2})
    for (double w_gap : {0.0, 1.0})
      for (bool input_first : {true, false}) {
        GreedyRules rules{limit, input_first, warmup, w_gap};
        StatusOr<GreedyResult> r = ListScheduler(spec, rules).Run();
        if (!r.ok()) {
          last_error = r.status();
          continue;
        }
        if (!best || r->cost < best->cost - 1e-9 ||
            (r->cost < best->cost + 1e-9 && r->peak < best->peak))
          best = std::move(*r);
      }
  if (!best) return last_error;
  return std::move(best->schedule);
}

}  // namespace pw::pipeline
