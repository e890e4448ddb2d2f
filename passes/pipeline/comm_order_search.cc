#include "passes/pipeline/comm_order_search.h"

#include <limits>
#include <optional>

#include "ir/action_edges.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"

namespace pw::pipeline {
namespace {

bool IsTransfer(ActionType t) { return IsComm(t) || t == ActionType::kBatchP2P; }

class Search {
 public:
  Search(const CommOrderOptions& options) : options_(options) {}

  // The makespan of a candidate, or nullopt when the checker refuses it.
  std::optional<double> Evaluate(const ActionSchedule& s) {
    ++evaluations_;
    CheckOptions check;
    check.semantics = options_.semantics;
    SimulationOptions simulation;
    simulation.costs = options_.costs;
    StatusOr<TimedResult> r = CheckAndSimulate(s, check, simulation);
    if (!r.ok()) return std::nullopt;
    return r->makespan;
  }

  bool budget_left() const { return evaluations_ < limit_; }
  int evaluations() const { return evaluations_; }

  // Hill climbing, first improvement, until no move helps or the budget is spent.
  // Stops after evaluation number `limit`.
  int Improve(ActionSchedule& best, double& makespan, int limit) {
    limit_ = limit;
    int accepted = 0;
    EdgeIndex edges(best);
    for (bool improved = true; improved && budget_left();) {
      improved = false;
      for (int r = 0; r < best.num_ranks() && budget_left(); ++r)
        for (size_t i = 0; i + 1 < best.ranks[r].size() && budget_left(); ++i)
          for (Move move : {Move::kSwap, Move::kJoin, Move::kSplit}) {
            std::optional<ActionSchedule> candidate = Apply(best, edges, r, i, move);
            if (!candidate) continue;
            std::optional<double> m = Evaluate(*candidate);
            if (!m || *m >= makespan - 1e-9) continue;
            best = std::move(*candidate);
            makespan = *m;
            ++accepted;
            improved = true;
          }
    }
    return accepted;
  }

 private:
  enum class Move { kSwap, kJoin, kSplit };

  // Identifies a transfer the same way on both of its ranks.
  static int64_t TransferKey(const EdgeIndex& edges, const Action& c, int M) {
    const bool backward = c.type == ActionType::kSendB || c.type == ActionType::kRecvB;
    return (static_cast<int64_t>(edges.OfComm(c)) * M + c.micro_batch) * 2 + backward;
  }

  // The rank at the other end of a send or recv.
  static int PeerRank(const ActionSchedule& s, const EdgeIndex& edges, const Action& c) {
    const StageEdge& e = edges.edge(edges.OfComm(c));
    const int other = c.stage == e.src ? e.dst : e.src;
    return s.stage_to_rank[other];
  }

  // Where rank q holds the other end of transfer `c` at the top level (not inside a
  // batch), or -1.
  static int FindMatch(const ActionSchedule& s, const EdgeIndex& edges, int q, const Action& c) {
    const int64_t key = TransferKey(edges, c, s.num_micro_batches);
    for (size_t k = 0; k < s.ranks[q].size(); ++k) {
      const Action& a = s.ranks[q][k];
      if (IsComm(a.type) && a.type != c.type && TransferKey(edges, a, s.num_micro_batches) == key)
        return static_cast<int>(k);
    }
    return -1;
  }

  std::optional<ActionSchedule> Apply(const ActionSchedule& s, const EdgeIndex& edges, int r,
                                      size_t i, Move move) const {
    const Action a = s.ranks[r][i], b = s.ranks[r][i + 1];
    if (move == Move::kSwap) {
      if (!IsTransfer(a.type) && !IsTransfer(b.type)) return std::nullopt;
      ActionSchedule out = s;
      std::swap(out.ranks[r][i], out.ranks[r][i + 1]);
      if (IsComm(a.type) && IsComm(b.type)) {
        const int q = PeerRank(s, edges, a);
        if (q != r && q == PeerRank(s, edges, b)) {
          const int ma = FindMatch(s, edges, q, a), mb = FindMatch(s, edges, q, b);
          if (ma < 0 || mb < 0) return std::nullopt;
          std::swap(out.ranks[q][ma], out.ranks[q][mb]);
        }
      }
      return out;
    }
    if (move == Move::kJoin) {
      if (!IsTransfer(a.type) || !IsTransfer(b.type) || !s.CanAddGroup()) return std::nullopt;
      ActionSchedule out = s;
      std::vector<Action> parts;
      for (const Action& x : {a, b})
        for (const Action& p : s.Parts(x)) parts.push_back(p);
      out.ranks[r][i] = out.AddGroup(ActionType::kBatchP2P, parts);
      out.ranks[r].erase(out.ranks[r].begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return out;
    }
    if (a.type != ActionType::kBatchP2P) return std::nullopt;
    ActionSchedule out = s;
    std::span<const Action> parts = s.Parts(a);
    std::vector<Action> copy(parts.begin(), parts.end());
    out.ranks[r].erase(out.ranks[r].begin() + static_cast<std::ptrdiff_t>(i));
    out.ranks[r].insert(out.ranks[r].begin() + static_cast<std::ptrdiff_t>(i), copy.begin(),
                        copy.end());
    return out;
  }

  const CommOrderOptions& options_;
  int evaluations_ = 0;
  int limit_ = 0;
};

}  // namespace

StatusOr<CommOrderResult> SearchCommOrder(const ActionSchedule& compute,
                                          const CommOrderOptions& options) {
  if (compute.HasComms())
    return FailedPrecondition(
        "order-comm lowers the schedule itself: it already has send/recv "
        "actions (run order-comm instead of insert-p2p)");
  PW_RETURN_IF_ERROR(CheckActionCosts(options.costs));
  if (options.max_evaluations < 0)
    return InvalidArgument("max-evals must be >= 0, got ", options.max_evaluations);
  Search search(options);
  CommOrderResult result;
  result.makespan = std::numeric_limits<double>::infinity();
  // Every valid fixed order is a start: the best one is not always the nearest to the
  // best reachable order.
  struct Start {
    ActionSchedule schedule;
    double makespan;
    std::string order;
  };
  std::vector<Start> starts;
  for (P2POrder order :
       {P2POrder::kNaive, P2POrder::kParity, P2POrder::kBatched, P2POrder::kMegatron}) {
    StatusOr<ActionSchedule> placed = InsertP2P(compute, {order});
    // Megatron's placement is defined for its own schedules only (1F1B, interleaved 1F1B).
    if (!placed.ok() && order == P2POrder::kMegatron) continue;
    PW_ASSIGN_OR_RETURN(ActionSchedule lowered, std::move(placed));
    FixedOrderMakespan fixed{P2POrderName(order)};
    if (std::optional<double> m = search.Evaluate(lowered)) {
      fixed.valid = true;
      fixed.makespan = *m;
      starts.push_back({std::move(lowered), *m, fixed.order});
    }
    result.fixed.push_back(fixed);
  }
  if (starts.empty())
    return FailedPrecondition("no fixed send/recv order is deadlock-free under ",
                              CommSemanticsName(options.semantics), " semantics");
  // Each start gets an equal share of the evaluations left.
  const int share =
      (options.max_evaluations - search.evaluations()) / static_cast<int>(starts.size());
  for (Start& start : starts) {
    const int accepted =
        search.Improve(start.schedule, start.makespan, search.evaluations() + share);
    if (start.makespan < result.makespan) {
      result.makespan = start.makespan;
      result.schedule = std::move(start.schedule);
      result.start = start.order;
      result.accepted_moves = accepted;
    }
  }
  result.evaluations = search.evaluations();
  return result;
}

}  // namespace pw::pipeline
