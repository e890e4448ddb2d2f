#include "passes/pipeline/exact_schedule.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "passes/pipeline/schedule_generators.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {
namespace {

constexpr int kMaxStages = 8;
constexpr int kMaxMicroBatches = 16;
constexpr double kEps = 1e-9;

enum Kind : int8_t { kF = 0, kI = 1, kW = 2, kNone = 3 };

// Everything a node knows; copied into each child, which is cheaper than undoing moves at
// these sizes.
struct Node {
  std::array<double, kMaxStages> clock{};
  std::array<double, kMaxStages> mem{};
  std::array<int8_t, kMaxStages> nf{}, ni{}, nw{};  // actions placed, by kind
  std::array<int8_t, kMaxStages> len{};             // actions chosen (placed or committed)
  std::array<Kind, kMaxStages> pending{};           // chosen, waiting for its input
  std::array<double, kMaxStages * kMaxMicroBatches> f_end{}, i_end{};
};

class BranchAndBound {
 public:
  BranchAndBound(const ScheduleSpec& spec, int64_t node_limit)
      : S_(spec.num_stages),
        M_(spec.num_micro_batches),
        costs_(spec.costs),
        limit_(spec.mem_limit > 0 ? spec.mem_limit : spec.num_stages),
        node_limit_(node_limit) {
    for (int s = 0; s < S_; ++s) {
      f_[s] = costs_.Of(ActionType::kForward, s);
      i_[s] = costs_.Of(ActionType::kBackwardInput, s);
      w_[s] = costs_.Of(ActionType::kBackwardWeight, s);
      // F(0) is every rank's first action, and starts as soon as it arrives.
      first_start_[s] = s == 0 ? 0 : first_start_[s - 1] + f_[s - 1] + costs_.comm;
    }
  }

  // Searches for a cost below `bound`; returns whether it finished.
  bool Run(double bound) {
    best_ = bound;
    Node root;
    root.pending.fill(kNone);
    Search(root);
    return nodes_ <= node_limit_;
  }

  bool improved() const { return improved_; }
  double best() const { return best_; }
  int64_t nodes() const { return nodes_; }

  ActionSchedule BestSchedule(const ScheduleSpec& spec) const {
    ActionSchedule schedule = EmptySchedule(spec);
    for (int s = 0; s < S_; ++s) {
      int count[3] = {0, 0, 0};
      for (int k = 0; k < 3 * M_; ++k) {
        Kind kind = best_words_[s][k];
        static constexpr ActionType kTypes[] = {ActionType::kForward, ActionType::kBackwardInput,
                                                ActionType::kBackwardWeight};
        schedule.ranks[s].push_back(MakeAction(kTypes[kind], s, count[kind]++));
      }
    }
    return schedule;
  }

 private:
  size_t Slot(int s, int m) const { return static_cast<size_t>(s) * kMaxMicroBatches + m; }

  // When rank s's action of `kind` can start, or -1 while its input is not computed.
  double ReadyAt(const Node& n, int s, Kind kind) const {
    if (kind == kF) {
      const int m = n.nf[s];
      if (s == 0) return n.clock[s];
      if (n.nf[s - 1] <= m) return -1;
      return std::max(n.clock[s], n.f_end[Slot(s - 1, m)] + costs_.comm);
    }
    if (kind == kI) {
      const int m = n.ni[s];
      double t = std::max(n.clock[s], n.f_end[Slot(s, m)]);
      if (s == S_ - 1) return t;
      if (n.ni[s + 1] <= m) return -1;
      return std::max(t, n.i_end[Slot(s + 1, m)] + costs_.comm);
    }
    return n.clock[s];
  }

  void Place(Node& n, int s, Kind kind, double start) const {
    if (kind == kF) {
      double end = start + f_[s];
      n.f_end[Slot(s, n.nf[s]++)] = end;
      n.clock[s] = end;
      n.mem[s] += 1;
    } else if (kind == kI) {
      double end = start + i_[s];
      n.i_end[Slot(s, n.ni[s]++)] = end;
      n.clock[s] = end;
      n.mem[s] -= 1 - costs_.w_mem;
    } else {
      ++n.nw[s];
      n.clock[s] = start + w_[s];
      n.mem[s] -= costs_.w_mem;
    }
  }

  // Places every committed action whose input is now computed.
  void Settle(Node& n) const {
    for (bool moved = true; moved;) {
      moved = false;
      for (int s = 0; s < S_; ++s) {
        if (n.pending[s] == kNone) continue;
        double start = ReadyAt(n, s, n.pending[s]);
        if (start < 0) continue;
        Place(n, s, n.pending[s], start);
        n.pending[s] = kNone;
        moved = true;
      }
    }
  }

  // How long rank s must idle before its next I: that I cannot start before its
  // micro-batch went down the remaining stages and back, and until then the rank has only
  // the forwards its memory allows (W's release some) and the W's it owes.
  double ForcedIdle(const Node& n, int s) const {
    const int m = n.ni[s];
    if (m == M_) return 0;
    double f_end = 0;
    std::array<double, kMaxStages> f_ends{};
    for (int k = 0; k < S_; ++k) {
      if (n.nf[k] > m) {
        f_end = n.f_end[Slot(k, m)];
      } else {
        f_end = std::max(n.clock[k] + (m - n.nf[k] + 1) * f_[k],
                         k > 0 ? f_end + costs_.comm + f_[k] : 0.0);
      }
      f_ends[k] = f_end;
    }
    double i_end = 0;
    for (int k = S_ - 1; k >= s; --k) {
      if (n.ni[k] > m) {
        i_end = n.i_end[Slot(k, m)];
      } else {
        i_end = std::max({f_ends[k] + i_[k], n.clock[k] + i_[k],
                          k < S_ - 1 ? i_end + costs_.comm + i_[k] : 0.0});
      }
    }
    const double i_start = i_end - i_[s];
    const int owed_w = n.ni[s] - n.nw[s];
    const double room = limit_ - n.mem[s] + owed_w * costs_.w_mem;
    const int forwards = std::min(M_ - n.nf[s], static_cast<int>(room + kEps));
    const double fill = std::max(0, forwards) * f_[s] + owed_w * w_[s];
    return std::max(0.0, i_start - n.clock[s] - fill);
  }

  // No schedule below this node ends before it.
  double LowerBound(const Node& n) const {
    double lb = 0;
    std::array<double, kMaxStages> last_f{}, last_i{};
    for (int s = 0; s < S_; ++s) {
      last_f[s] = n.nf[s] == M_ ? n.f_end[Slot(s, M_ - 1)]
                                : std::max(n.clock[s] + (M_ - n.nf[s]) * f_[s],
                                           s > 0 ? last_f[s - 1] + costs_.comm + f_[s] : 0.0);
    }
    for (int s = S_ - 1; s >= 0; --s) {
      last_i[s] = n.ni[s] == M_
                      ? n.i_end[Slot(s, M_ - 1)]
                      : std::max({last_f[s] + i_[s], n.clock[s] + (M_ - n.ni[s]) * i_[s],
                                  s < S_ - 1 ? last_i[s + 1] + costs_.comm + i_[s] : 0.0});
      const double work = (M_ - n.nf[s]) * f_[s] + (M_ - n.ni[s]) * i_[s] + (M_ - n.nw[s]) * w_[s];
      const double end =
          std::max(n.clock[s] + ForcedIdle(n, s) + work, last_i[s] + (n.nw[s] < M_ ? w_[s] : 0.0));
      lb = std::max(lb, end - first_start_[s]);
    }
    return lb;
  }

  void Search(Node& n) {
    if (++nodes_ > node_limit_) return;
    Settle(n);
    if (LowerBound(n) >= best_ - kEps) return;
    int r = -1;
    bool done = true;
    for (int s = 0; s < S_; ++s) {
      if (n.len[s] < 3 * M_ || n.pending[s] != kNone) done = false;
      if (n.pending[s] != kNone || n.len[s] == 3 * M_) continue;
      if (r < 0 || n.clock[s] < n.clock[r]) r = s;
    }
    if (done) {
      double cost = 0;
      for (int s = 0; s < S_; ++s) cost = std::max(cost, n.clock[s] - first_start_[s]);
      if (cost < best_ - kEps) {
        best_ = cost;
        best_words_ = words_;
        improved_ = true;
      }
      return;
    }
    if (r < 0) return;  // every unfinished rank waits for another: a deadlock
    auto allowed = [&](Kind kind) {
      if (kind == kF) return n.nf[r] < M_ && n.mem[r] + 1 <= limit_ + kEps;
      if (kind == kI) return n.ni[r] < n.nf[r];
      return n.nw[r] < n.ni[r];
    };
    // A W feeds nobody: when an F or I can start right away, running it first and the W
    // after ends the W at the same time and the other earlier, so W-first is never needed.
    bool other_now = false;
    for (Kind kind : {kI, kF}) other_now |= allowed(kind) && ReadyAt(n, r, kind) == n.clock[r];
    for (Kind kind : {kI, kF, kW}) {
      if (!allowed(kind) || (kind == kW && other_now)) continue;
      Node child = n;
      words_[r][child.len[r]++] = kind;
      double start = ReadyAt(child, r, kind);
      if (start < 0) {
        child.pending[r] = kind;
      } else {
        Place(child, r, kind, start);
      }
      Search(child);
      if (nodes_ > node_limit_) return;
    }
  }

  const int S_, M_;
  const ActionCosts& costs_;
  const double limit_;
  const int64_t node_limit_;
  std::array<double, kMaxStages> f_{}, i_{}, w_{}, first_start_{};
  int64_t nodes_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
  std::array<std::array<Kind, 3 * kMaxMicroBatches>, kMaxStages> words_{};
  std::array<std::array<Kind, 3 * kMaxMicroBatches>, kMaxStages> best_words_{};
  bool improved_ = false;
};

}  // namespace

StatusOr<ExactResult> SolveExactSchedule(const ScheduleSpec& spec, int64_t node_limit) {
  if (spec.num_stages != spec.num_ranks || spec.placement != Placement::kLoop)
    return InvalidArgument("the exact search takes one stage per rank");
  if (spec.num_stages > kMaxStages || spec.num_micro_batches > kMaxMicroBatches)
    return InvalidArgument("the exact search takes at most ", kMaxStages, " stages and ",
                           kMaxMicroBatches, " micro-batches");
  PW_ASSIGN_OR_RETURN(ActionSchedule start, GenerateSchedule(spec));
  SimulationOptions options;
  options.costs = spec.costs;
  PW_ASSIGN_OR_RETURN(TimedResult timed, SimulateTimed(start, options));

  BranchAndBound search(spec, node_limit);
  ExactResult result;
  result.start_cost = timed.cost;
  result.optimal = search.Run(timed.cost);
  result.nodes = search.nodes();
  result.cost = search.improved() ? search.best() : timed.cost;
  result.schedule = search.improved() ? search.BestSchedule(spec) : std::move(start);
  return result;
}

}  // namespace pw::pipeline
