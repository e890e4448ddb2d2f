// Cost-aware schedules by list scheduling, in the spirit of the Zero Bubble paper's
// heuristic. Whenever a rank is free it runs, among the actions that are ready: an input
// gradient I (it unblocks the previous stage and frees memory), else a forward if the
// memory limit allows one more micro-batch, else a deferred weight gradient W, which fills
// what would otherwise be a bubble. zb-h2 is this with 2P M_B per rank; zb-auto tries
// variants of the rules and keeps the one with the shortest longest rank span (then
// makespan, then memory), or ZB-H1 where the limit holds it and it is no worse.

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "passes/pipeline/schedule_checker.h"
#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline {

namespace {

constexpr double kUnknown = -1;
constexpr double kNever = std::numeric_limits<double>::infinity();

struct GreedyRules {
  double mem_limit = 0;          // M_B per rank
  bool input_grad_first = true;  // prefer a ready I over a ready F
  // When > 0, stage s keeps at most factor*(P-s) - (factor-1) forwards in flight on top of
  // the memory limit (1: 1F1B's warm-up, 2: eager 1F1B's). kTimedWarmup and
  // kTimedWarmupLoose size each stage's warm-up by the clock instead (TimedWarmup).
  int warmup_factor = 0;
  // Run a W in a gap only when nothing becomes ready within w_gap W-costs; kTailWGap: one
  // W-cost on a rank whose next input gradient is the last one an earlier stage waits for
  // (a W that holds it back delays the end of every stage before), none elsewhere.
  double w_gap = 0;
};

constexpr int kTimedWarmup = -1;       // the forwards that end before I(0) arrives
constexpr int kTimedWarmupLoose = -2;  // the forwards that start before I(0) arrives

// The variants zb-auto tries of each rule.
// In the order the search tries them: the timed and 1F1B warm-ups and the careful W rule
// usually win, and a good first result lets the later runs stop early.
constexpr std::array<int, 5> kWarmupFactors = {kTimedWarmup, 1, kTimedWarmupLoose, 2, 0};
constexpr double kTailWGap = -1;
constexpr std::array<double, 3> kWGaps = {1.0, kTailWGap, 0.0};

template <typename T, size_t N>
size_t IndexOf(const std::array<T, N>& values, T value) {
  return std::find(values.begin(), values.end(), value) - values.begin();
}

// Which other values of the rules (among the variants above) would have changed at least
// one decision of a run. A variant that differs from the run only in rules whose other
// values never mattered makes the same decisions step by step, so it has the same result.
struct RuleSensitivity {
  bool input_grad_first = false;                     // an I and an F were ready together
  std::array<bool, kWarmupFactors.size()> warmup{};  // by index in kWarmupFactors
  std::array<bool, kWGaps.size()> w_gap{};           // by index in kWGaps

  // Whether every other value of a rule than the run's own (by index) has mattered: then
  // the run need not track that rule any further.
  bool AllWarmupsMatter(size_t own) const { return AllBut(warmup, own); }
  bool AllWGapsMatter(size_t own) const { return AllBut(w_gap, own); }

  // Whether a run under `ran` with this sensitivity shows that a run under `other` makes
  // the same decisions: each rule is the same or never mattered.
  bool SameDecisions(const GreedyRules& ran, const GreedyRules& other) const {
    const size_t k = IndexOf(kWarmupFactors, other.warmup_factor);
    const size_t g = IndexOf(kWGaps, other.w_gap);
    if (ran.mem_limit != other.mem_limit || k == warmup.size() || g == w_gap.size()) return false;
    return (ran.input_grad_first == other.input_grad_first || !input_grad_first) &&
           (ran.warmup_factor == other.warmup_factor || !warmup[k]) &&
           (ran.w_gap == other.w_gap || !w_gap[g]);
  }

 private:
  template <size_t N>
  static bool AllBut(const std::array<bool, N>& mattered, size_t own) {
    for (size_t i = 0; i < N; ++i)
      if (i != own && !mattered[i]) return false;
    return true;
  }
};

// The ranks due to be looked at, by time, the higher rank first among equal times. A
// tournament tree over the ranks: every node holds the first of the queued ranks below it
// with its time (so a match reads no other array), and waking or dropping a rank replays
// only the matches on its path to the root. The scheduler spends most of its time here.
class RankQueue {
 public:
  explicit RankQueue(int ranks) {
    while (leaves_ < ranks) leaves_ *= 2;
    tree_.assign(2 * static_cast<size_t>(leaves_), Entry{});
  }
  bool empty() const { return tree_[1].rank == kNone; }
  bool queued(int r) const { return tree_[leaves_ + r].rank != kNone; }
  double time(int r) const { return tree_[leaves_ + r].time; }
  int first() const { return tree_[1].rank; }
  // Queues rank r at time t, or moves it there.
  void Wake(int r, double t) { Replay(r, Entry{t, r}); }
  void Drop(int r) { Replay(r, Entry{}); }

 private:
  static constexpr int kNone = -1;
  struct Entry {
    double time = kNever;  // an empty leaf loses every match
    int rank = kNone;
  };

  static const Entry& Winner(const Entry& a, const Entry& b) {
    return a.time < b.time || (a.time == b.time && a.rank > b.rank) ? a : b;
  }
  // Sets rank r's leaf and replays the matches above it.
  void Replay(int r, Entry leaf) {
    size_t i = leaves_ + r;
    tree_[i] = leaf;
    for (; i > 1; i /= 2) tree_[i / 2] = Winner(tree_[i & ~size_t{1}], tree_[i | 1]);
  }

  size_t leaves_ = 1;
  std::vector<Entry> tree_;  // node i has children 2i and 2i + 1; leaves from leaves_
};

struct GreedyResult {
  ActionSchedule schedule;
  double cost = 0;      // longest per-rank span
  double makespan = 0;  // first start to last end over the ranks
  double peak = 0;      // largest per-rank memory, M_B
};

class ListScheduler {
 public:
  ListScheduler(const ScheduleSpec& spec, const GreedyRules& rules)
      : spec_(spec),
        rules_(rules),
        S_(spec.num_stages),
        M_(spec.num_micro_batches),
        R_(spec.num_ranks),
        costs_(spec.costs),
        queue_(spec.num_ranks) {}

  // Which rules this run's decisions depended on (also after a failed run).
  const RuleSensitivity& sensitivity() const { return sensitivity_; }

  // A run that cannot end at or below `cutoff` stops early with cost infinity: zb-auto has
  // a schedule that good already, and a rank that idled more than that one's cannot catch
  // up. (One that ties may still win on its makespan.)
  StatusOr<GreedyResult> Run(double cutoff = kNever) {
    cutoff_ = cutoff;
    GreedyResult result;
    result.schedule = EmptySchedule(spec_);
    rank_of_ = result.schedule.stage_to_rank;
    stages_of_.assign(R_, {});
    // Later stages first: on a rank with several, that pushes micro-batches deeper.
    for (int s = S_ - 1; s >= 0; --s) stages_of_[rank_of_[s]].push_back(s);
    ends_.assign(static_cast<size_t>(S_) * M_, Ends{});
    next_f_.assign(S_, 0);
    next_i_.assign(S_, 0);
    ranks_.assign(R_, RankState{});
    ComputeWarmupCaps();
    warmup_index_ = IndexOf(kWarmupFactors, rules_.warmup_factor);
    w_gap_index_ = IndexOf(kWGaps, rules_.w_gap);
    if (warmup_index_ == kWarmupFactors.size() || w_gap_index_ == kWGaps.size())
      return Internal("zb-auto rules outside the variants it tries");
    stage_costs_.clear();
    for (int s = 0; s < S_; ++s)
      stage_costs_.push_back({costs_.Of(ActionType::kForward, s),
                              costs_.Of(ActionType::kBackwardInput, s),
                              costs_.Of(ActionType::kBackwardWeight, s)});
    ComputeDrains();
    for (int r = 0; r < R_; ++r) {
      for (int s : stages_of_[r]) {
        const StageCosts& c = stage_costs_[s];
        ranks_[r].work_left += M_ * (c.forward + c.input_grad + c.weight_grad);
        ranks_[r].pending_w.reserve(static_cast<size_t>(M_) * stages_of_[r].size());
      }
      result.schedule.ranks[r].reserve(3 * stages_of_[r].size() * static_cast<size_t>(M_));
      Wake(r, 0);
    }
    size_t remaining = 3 * static_cast<size_t>(S_) * M_;
    while (remaining > 0) {
      if (queue_.empty())
        return FailedPrecondition("no schedule fits the memory limit of ", rules_.mem_limit,
                                  " M_B per rank");
      // The first rank stays queued: the step moves it to when it is free again.
      const int r = queue_.first();
      if (Step(r, queue_.time(r), result.schedule.ranks[r])) --remaining;
      if (over_cutoff_) {
        result.cost = kNever;
        return result;
      }
    }
    double first = kNever, last = 0;
    for (const RankState& rank : ranks_) {
      result.cost = std::max(result.cost, rank.last_end - rank.first_start);
      result.peak = std::max(result.peak, rank.peak);
      first = std::min(first, rank.first_start);
      last = std::max(last, rank.last_end);
    }
    result.makespan = last - first;
    return result;
  }

 private:
  struct RankState {
    double idle_since = 0;  // when it last found nothing to do (or its busy end)
    double first_start = kNever, last_end = 0;
    double work_left = 0;  // compute time of the actions it has not run yet
    double mem = 0, peak = 0;
    // (stage, micro-batch) whose W is due from pending_w[next_w]: a queue that never
    // shrinks, so taking from it costs one index.
    std::vector<std::pair<int, int>> pending_w;
    size_t next_w = 0;
    bool owes_w() const { return next_w < pending_w.size(); }
  };

  // When the F and I of a (stage, micro-batch) end, kUnknown until they have run.
  struct Ends {
    double forward = kUnknown, input_grad = kUnknown;
  };
  Ends& EndsOf(int s, int m) { return ends_[static_cast<size_t>(m) * S_ + s]; }
  const Ends& EndsOf(int s, int m) const { return ends_[static_cast<size_t>(m) * S_ + s]; }

  double Cross(int a, int b) const { return rank_of_[a] == rank_of_[b] ? 0 : costs_.comm; }

  // When the next F / I of stage s can start, kNever while that is not known yet.
  double ReadyF(int s) const {
    int m = next_f_[s];
    if (m >= M_) return kNever;
    if (s == 0) return 0;
    double end = EndsOf(s - 1, m).forward;
    return end == kUnknown ? kNever : end + Cross(s - 1, s);
  }
  double ReadyI(int s) const {
    int m = next_i_[s];
    if (m >= next_f_[s]) return kNever;  // its forward has not run yet
    const double own = EndsOf(s, m).forward;
    if (s == S_ - 1) return own;
    double end = EndsOf(s + 1, m).input_grad;
    return end == kUnknown ? kNever : std::max(end + Cross(s + 1, s), own);
  }

  bool ForwardAllowed(int r, int s) {
    if (ranks_[r].mem + 1 > rules_.mem_limit + 1e-9) return false;
    const int in_flight = next_f_[s] - next_i_[s];
    const WarmupCaps& caps = warmup_caps_[s];
    const bool ok = in_flight < caps[warmup_index_];
    if (track_warmup_) {
      for (size_t i = 0; i < caps.size(); ++i)
        sensitivity_.warmup[i] |= (in_flight < caps[i]) != ok;
      track_warmup_ = !sensitivity_.AllWarmupsMatter(warmup_index_);
    }
    return ok;
  }

  // Each warm-up variant's cap on stage s's forwards in flight: factor*(P-s) - (factor-1)
  // for the 1F1B-like ones, the timed caps below, none for factor 0.
  void ComputeWarmupCaps() {
    std::vector<int> timed_cap(S_, 1), timed_cap_loose(S_, 1);
    TimedWarmup(timed_cap, timed_cap_loose);
    warmup_caps_.assign(S_, {});
    for (int s = 0; s < S_; ++s)
      for (size_t i = 0; i < kWarmupFactors.size(); ++i) {
        const int k = kWarmupFactors[i];
        warmup_caps_[s][i] = k == kTimedWarmup        ? timed_cap[s]
                             : k == kTimedWarmupLoose ? timed_cap_loose[s]
                             : k == 0                 ? std::numeric_limits<int>::max()
                                      : std::max(1, k * (R_ - rank_of_[s]) - (k - 1));
      }
  }

  // How late rank r can finish at the earliest, once it is free at `end`: after the work it
  // has left, and, while the last forward of its one stage is still to come, after the
  // drain that forward starts (down the later stages, the input gradients back, then its
  // W), of which it can fill only what fits in memory. Runs end within a hair of each
  // other, so without the drain a run that cannot win is seen only in its cool-down.
  double FinishBound(int r, double end) const {
    const RankState& rank = ranks_[r];
    double finish = end + rank.work_left;
    if (stages_of_[r].size() != 1) return finish;
    const int s = stages_of_[r][0];
    const Drain& d = drains_[s];
    if (next_f_[s] < M_ && d.chain > d.fill)
      finish = std::max(finish, end + std::max(0.0, rank.work_left - d.fill) + d.chain);
    return finish;
  }

  // Per stage, for FinishBound. From the start of the last forward F(s, M-1), its rank
  // needs `chain` until W(s, M-1) ends (the chain of F and then I of micro-batch M-1
  // through the later stages, never shorter whatever runs where), and can work at most
  // `fill` of that: F, I and W of M-1, and what the micro-batches it holds in memory (at
  // most limit - 1 M_B when the last F starts) still owe: I + W for one in flight (1 M_B),
  // W for one whose I ran (w_mem M_B).
  void ComputeDrains() {
    drains_.assign(S_, Drain{});
    const double w_mem = costs_.w_mem;
    if (w_mem <= 0) return;  // W's hold no memory: any number can wait for the drain
    double down_and_back = 0;
    for (int s = S_ - 1; s >= 0; --s) {
      const StageCosts& c = stage_costs_[s];
      down_and_back += c.forward + c.input_grad + (s + 1 < S_ ? 2 * Cross(s, s + 1) : 0);
      const double per_mb = std::max(c.input_grad + c.weight_grad, c.weight_grad / w_mem);
      drains_[s].chain = down_and_back + c.weight_grad;
      drains_[s].fill = c.forward + c.input_grad + c.weight_grad +
                        std::max(0.0, rules_.mem_limit - 1 + 1e-9) * per_mb;
    }
  }

  // The Zero Bubble paper's warm-up: stage s runs forwards back to back from when F(0)
  // reaches it until I(0) comes back (when nothing on the way delays either), so that no
  // forward is still running when I(0) arrives, which would hold it back on every stage
  // before. The loose cap also counts the forward that starts just before I(0) arrives.
  void TimedWarmup(std::vector<int>& cap, std::vector<int>& loose) const {
    std::vector<double> f0_end(S_);
    for (int s = 0; s < S_; ++s)
      f0_end[s] = (s ? f0_end[s - 1] + Cross(s - 1, s) : 0) + costs_.Of(ActionType::kForward, s);
    double i0_ready = f0_end[S_ - 1];
    for (int s = S_ - 1; s >= 0; --s) {
      if (s < S_ - 1) i0_ready += costs_.Of(ActionType::kBackwardInput, s + 1) + Cross(s + 1, s);
      const double f = costs_.Of(ActionType::kForward, s);
      if (f <= 0) continue;
      const double room = (i0_ready - (f0_end[s] - f)) / f;
      cap[s] = std::max(1, static_cast<int>(std::floor(room + 1e-9)));
      loose[s] = std::max(1, static_cast<int>(std::ceil(room - 1e-9)));
    }
  }

  // Whether rank r owes the last input gradient of a stage that an earlier stage waits
  // for: that I sets when the first stage can finish.
  bool OwesLastInputGrad(int r) const {
    for (int s : stages_of_[r])
      if (s > 0 && next_i_[s] == M_ - 1) return true;
    return false;
  }

  void Wake(int r, double t) { queue_.Wake(r, t); }

  // Something on `stage` becomes ready at `ready`: look at its rank again then if it is
  // waiting for work.
  void Notify(int stage, double ready) {
    int q = rank_of_[stage];
    RankState& rank = ranks_[q];
    double t = std::max(ready, rank.idle_since);
    if (!queue_.queued(q) || t < queue_.time(q)) Wake(q, t);
  }

  // Rank r is free at t: runs the best ready action, or waits.
  bool Step(int r, const double t, std::vector<Action>& out) {
    RankState& rank = ranks_[r];
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
    sensitivity_.input_grad_first |= best_i >= 0 && best_f >= 0;
    if (best_i >= 0 && (rules_.input_grad_first || best_f < 0)) {
      int m = next_i_[best_i]++;
      double end = Run(r, ActionType::kBackwardInput, best_i, m, t, out);
      EndsOf(best_i, m).input_grad = end;
      rank.mem -= 1 - costs_.w_mem;
      rank.pending_w.emplace_back(best_i, m);
      if (best_i > 0) Notify(best_i - 1, end + Cross(best_i, best_i - 1));
      return true;
    }
    if (best_f >= 0) {
      int m = next_f_[best_f]++;
      double end = Run(r, ActionType::kForward, best_f, m, t, out);
      EndsOf(best_f, m).forward = end;
      rank.mem += 1;
      rank.peak = std::max(rank.peak, rank.mem);
      if (best_f + 1 < S_) Notify(best_f + 1, end + Cross(best_f, best_f + 1));
      return true;
    }
    auto runs_w = [&](double w_gap) {
      if (w_gap == kTailWGap) w_gap = OwesLastInputGrad(r) ? 1 : 0;
      return next_known - t >= w_gap * w_cost;
    };
    if (rank.owes_w() && track_w_gap_) {
      const bool ok = runs_w(rules_.w_gap);
      for (size_t i = 0; i < kWGaps.size(); ++i) sensitivity_.w_gap[i] |= runs_w(kWGaps[i]) != ok;
      track_w_gap_ = !sensitivity_.AllWGapsMatter(w_gap_index_);
    }
    if (rank.owes_w() && runs_w(rules_.w_gap)) {
      auto [s, m] = rank.pending_w[rank.next_w++];
      Run(r, ActionType::kBackwardWeight, s, m, t, out);
      rank.mem -= costs_.w_mem;
      return true;
    }
    rank.idle_since = t;
    if (next_known < kNever)
      Wake(r, next_known);
    else
      queue_.Drop(r);  // until an action of another rank makes one of its own ready
    return false;
  }

  double Run(int r, ActionType type, int s, int m, double t, std::vector<Action>& out) {
    RankState& rank = ranks_[r];
    const StageCosts& c = stage_costs_[s];
    const double cost = type == ActionType::kForward         ? c.forward
                        : type == ActionType::kBackwardInput ? c.input_grad
                                                             : c.weight_grad;
    double end = t + cost;
    out.push_back(MakeAction(type, s, m));
    rank.first_start = std::min(rank.first_start, t);
    rank.last_end = end;
    rank.work_left -= cost;
    over_cutoff_ |= FinishBound(r, end) - rank.first_start > cutoff_ + 1e-9;
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
  // By micro-batch, then stage: the ranks work on nearby micro-batches, so what they read
  // of each other stays in a few cache lines.
  std::vector<Ends> ends_;
  std::vector<int> next_f_, next_i_;
  using WarmupCaps = std::array<int, kWarmupFactors.size()>;
  std::vector<WarmupCaps> warmup_caps_;        // by stage, see ComputeWarmupCaps
  size_t warmup_index_ = 0, w_gap_index_ = 0;  // of this run's rules in the variants
  // Whether the run still records which rules matter (not once every other value has).
  bool track_warmup_ = true, track_w_gap_ = true;
  std::vector<RankState> ranks_;
  struct StageCosts {
    double forward, input_grad, weight_grad;
  };
  std::vector<StageCosts> stage_costs_;  // costs_ per stage, looked up once
  struct Drain {
    double chain = 0, fill = 0;
  };
  std::vector<Drain> drains_;  // by stage, see ComputeDrains
  RankQueue queue_;
  RuleSensitivity sensitivity_;
  double cutoff_ = kNever;
  bool over_cutoff_ = false;
};

double DefaultMemLimit(const ScheduleSpec& spec) {
  return spec.mem_limit > 0 ? spec.mem_limit : spec.num_stages;
}

// zb-auto's search over the variants. With shortcuts, a variant that an earlier run shows
// would make the same decisions is not run again, and a run stops once it cannot win.
StatusOr<ActionSchedule> SearchZbAuto(const ScheduleSpec& spec, bool shortcuts) {
  const double limit = DefaultMemLimit(spec);
  if (limit < 1) return InvalidArgument("mem-limit ", limit, " is below one micro-batch (1 M_B)");
  struct Tried {
    GreedyRules rules;
    Status error;
    double cost = 0, makespan = 0, peak = 0;
    RuleSensitivity sensitivity;
  };
  std::vector<Tried> tried;
  std::optional<GreedyResult> best;
  Status last_error;
  // The shortest longest rank span (the paper's objective); among equal ones the shortest
  // makespan (ranks that start later end later: steps back to back take that long), then
  // the least memory.
  auto better = [&](double cost, double makespan, double peak) {
    if (!best || cost < best->cost - 1e-9) return true;
    if (cost > best->cost + 1e-9) return false;
    if (makespan < best->makespan - 1e-9) return true;
    return makespan < best->makespan + 1e-9 && peak < best->peak;
  };
  for (int warmup : kWarmupFactors)
    for (double w_gap : kWGaps)
      for (bool input_first : {true, false}) {
        GreedyRules rules{limit, input_first, warmup, w_gap};
        // A variant that an earlier run shows would make the same decisions has its
        // outcome; it needs a run of its own only to hand over a schedule that wins.
        auto same = std::find_if(tried.begin(), tried.end(), [&](const Tried& t) {
          return shortcuts && t.sensitivity.SameDecisions(t.rules, rules);
        });
        if (same != tried.end() &&
            (!same->error.ok() || !better(same->cost, same->makespan, same->peak))) {
          Tried copy = *same;
          copy.rules = rules;
          if (!copy.error.ok()) last_error = copy.error;
          tried.push_back(std::move(copy));
          continue;
        }
        ListScheduler scheduler(spec, rules);
        StatusOr<GreedyResult> r = scheduler.Run(best && shortcuts ? best->cost : kNever);
        tried.push_back({rules, r.status(), r.ok() ? r->cost : 0, r.ok() ? r->makespan : 0,
                         r.ok() ? r->peak : 0, scheduler.sensitivity()});
        if (!r.ok()) {
          last_error = r.status();
          continue;
        }
        if (better(r->cost, r->makespan, r->peak)) best = std::move(*r);
      }
  if (!best) return last_error;
  // ZB-H1 where the limit holds it: the paper's ZB-1p never does worse. Its fixed pattern
  // can tie the variants' longest span with a shorter makespan (the thin first and last
  // stages of a real model start the later ranks earlier), so both are replayed alike.
  if (spec.num_stages == spec.num_ranks) {
    ScheduleSpec h1 = spec;
    h1.kind = ScheduleKind::kZbH1;
    const ActionSchedule zb_h1 = GenerateOneFOneB(h1);
    CheckOptions check;
    check.mem_limit = limit;
    check.w_mem = spec.costs.w_mem;
    SimulationOptions timed;
    timed.costs = spec.costs;
    StatusOr<TimedResult> h1_time = CheckAndSimulate(zb_h1, check, timed);
    check.mem_limit = 0;  // the search's own schedule keeps its limit by construction
    StatusOr<TimedResult> best_time = CheckAndSimulate(best->schedule, check, timed);
    auto peak = [](const TimedResult& t) {
      double p = 0;
      for (const RankStats& r : t.ranks) p = std::max(p, r.peak_activations);
      return p;
    };
    if (h1_time.ok() && best_time.ok()) {
      best->cost = best_time->cost;
      best->makespan = best_time->makespan;
      best->peak = peak(*best_time);
      if (better(h1_time->cost, h1_time->makespan, peak(*h1_time))) return zb_h1;
    }
  }
  return std::move(best->schedule);
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
  return SearchZbAuto(spec, /*shortcuts=*/true);
}

StatusOr<ActionSchedule> GenerateZbAutoExhaustive(const ScheduleSpec& spec) {
  return SearchZbAuto(spec, /*shortcuts=*/false);
}

}  // namespace pw::pipeline
