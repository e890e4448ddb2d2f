#include "passes/pipeline/p2p_insertion.h"

#include <algorithm>
#include <atomic>

#include "ir/action_edges.h"
#include "ir/parallel.h"

namespace pw::pipeline {

StatusOr<P2POrder> ParseP2POrder(std::string_view name) {
  if (name == "naive") return P2POrder::kNaive;
  if (name == "parity") return P2POrder::kParity;
  if (name == "batched") return P2POrder::kBatched;
  if (name == "megatron") return P2POrder::kMegatron;
  if (name == "torch") return P2POrder::kTorch;
  return InvalidArgument("unknown p2p order '", name,
                         "' (known: naive, parity, batched, megatron, torch)");
}

const char* P2POrderName(P2POrder order) {
  switch (order) {
    case P2POrder::kNaive:
      return "naive";
    case P2POrder::kParity:
      return "parity";
    case P2POrder::kBatched:
      return "batched";
    case P2POrder::kMegatron:
      return "megatron";
    case P2POrder::kTorch:
      return "torch";
  }
  return "?";
}

CommSemantics DesignedSemantics(P2POrder order) {
  return order == P2POrder::kNaive || order == P2POrder::kTorch ? CommSemantics::kEager
                                                                : CommSemantics::kRendezvous;
}

ActionSchedule MergeBackward(const ActionSchedule& compute) {
  ActionSchedule out = compute;
  for (auto& actions : out.ranks) {
    std::vector<Action> merged;
    merged.reserve(actions.size());
    std::erase_if(actions, [](const Action& a) { return a.type == ActionType::kIdle; });
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (a.type == ActionType::kBackwardInput && i + 1 < actions.size()) {
        const Action& next = actions[i + 1];
        if (next.type == ActionType::kBackwardWeight && next.stage == a.stage &&
            next.micro_batch == a.micro_batch) {
          merged.push_back(MakeAction(ActionType::kBackward, a.stage, a.micro_batch));
          ++i;
          continue;
        }
      }
      merged.push_back(a);
    }
    actions = std::move(merged);
  }
  return out;
}

namespace {

// Places each send right after its producer and each recv right before its consumer.
class GapPlacer {
 public:
  GapPlacer(const ActionSchedule& s, const EdgeIndex& edges) : s_(s), edges_(edges) {}

  // Returns false, with `out` incomplete, when the rank already has a send or recv.
  bool PlaceRank(int r, std::vector<Action>& out) {
    const auto& actions = s_.ranks[r];
    out.reserve(actions.size() * 3);
    if (!edges_.has_skips()) return PlaceChainRank(r, out);
    gap_.clear();
    for (const Action& a : actions) {
      if (a.type == ActionType::kIdle) continue;
      if (IsLowered(a.type)) return false;
      for (const Action& p : s_.Parts(a)) AddComms(r, p, /*recvs=*/true);
      Flush(out);
      out.push_back(a);
      for (const Action& p : s_.Parts(a)) AddComms(r, p, /*recvs=*/false);
    }
    Flush(out);
    return true;
  }

 private:
  static bool IsLowered(ActionType t) { return IsComm(t) || t == ActionType::kBatchP2P; }

  int RankOf(int s) const { return s_.stage_to_rank[s]; }

  // Without skip edges and fused actions a compute action has at most one recv and one
  // send, so a gap is the previous action's send then the next one's recv: already in the
  // naive order.
  bool PlaceChainRank(int r, std::vector<Action>& out) {
    const int S = s_.num_stages;
    Action pending{};  // a send owed by the previous compute action (kIdle: none)
    for (const Action& a : s_.ranks[r]) {
      if (a.type == ActionType::kIdle) continue;
      if (IsLowered(a.type)) return false;
      if (IsFused(a.type)) {
        if (pending.type != ActionType::kIdle) gap_.push_back(pending);
        pending = Action{};
        for (const Action& p : s_.Parts(a)) AddComms(r, p, /*recvs=*/true);
        Flush(out);
        out.push_back(a);
        for (const Action& p : s_.Parts(a)) AddComms(r, p, /*recvs=*/false);
        // More than one send may be owed; emit them with the next gap.
        continue;
      }
      if (!gap_.empty()) Flush(out);  // sends owed by a fused action
      const int s = a.stage, m = a.micro_batch;
      const bool forward = a.type == ActionType::kForward;
      const bool backward = IsInputBackward(a.type);
      if (pending.type != ActionType::kIdle) out.push_back(pending);
      pending = Action{};
      const bool lower_remote = s > 0 && RankOf(s - 1) != r;
      const bool upper_remote = s + 1 < S && RankOf(s + 1) != r;
      if (forward && lower_remote) out.push_back(MakeAction(ActionType::kRecvF, s, m));
      if (backward && upper_remote) out.push_back(MakeAction(ActionType::kRecvB, s, m));
      out.push_back(a);
      if (forward && upper_remote) pending = MakeAction(ActionType::kSendF, s, m);
      if (backward && lower_remote) pending = MakeAction(ActionType::kSendB, s, m);
    }
    if (pending.type != ActionType::kIdle) gap_.push_back(pending);
    Flush(out);
    return true;
  }

  // The recvs a compute part needs before it, or the sends it owes after it.
  void AddComms(int r, const Action& p, bool recvs) {
    const int s = p.stage, m = p.micro_batch;
    const bool forward = p.type == ActionType::kForward;
    if (!forward && !IsInputBackward(p.type)) return;
    if (!edges_.has_skips()) {
      // Chain only: the neighbours are s-1 and s+1.
      const int S = s_.num_stages;
      if (forward == recvs) {  // F needs its input from s-1; B/I sends its gradient there
        if (s > 0 && RankOf(s - 1) != r)
          gap_.push_back(MakeAction(forward ? ActionType::kRecvF : ActionType::kSendB, s, m));
      } else if (s + 1 < S && RankOf(s + 1) != r) {
        gap_.push_back(MakeAction(forward ? ActionType::kSendF : ActionType::kRecvB, s, m));
      }
      return;
    }
    auto add = [&](ActionType t, int peer) {
      bool adjacent = peer == s + 1 || peer == s - 1;
      gap_.push_back(MakeAction(t, s, m, adjacent ? -1 : peer));
    };
    if (forward == recvs) {
      for (int e : edges_.InEdges(s))
        if (RankOf(edges_.edge(e).src) != r)
          add(forward ? ActionType::kRecvF : ActionType::kSendB, edges_.edge(e).src);
    } else {
      for (int e : edges_.OutEdges(s))
        if (RankOf(edges_.edge(e).dst) != r)
          add(forward ? ActionType::kSendF : ActionType::kRecvB, edges_.edge(e).dst);
    }
  }

  // Sends first (under eager semantics they never wait), then recvs; earlier stages first.
  // Gaps hold a handful of actions, so an insertion sort (stable, no allocation) is best.
  void Flush(std::vector<Action>& out) {
    auto key = [](const Action& a) {
      bool recv = a.type == ActionType::kRecvF || a.type == ActionType::kRecvB;
      return (static_cast<int>(recv) << 16) | a.stage;
    };
    for (size_t i = 1; i < gap_.size(); ++i)
      for (size_t j = i; j > 0 && key(gap_[j]) < key(gap_[j - 1]); --j)
        std::swap(gap_[j], gap_[j - 1]);
    for (const Action& c : gap_) out.push_back(c);
    gap_.clear();
  }

  const ActionSchedule& s_;
  const EdgeIndex& edges_;
  std::vector<Action> gap_;
};

}  // namespace

namespace {

// Global ordering key of an action for the time-ordered placements. A transfer has the
// same key on both of its ranks: the time its data is sent, Megatron's parity class when
// the two ranks are neighbours, then its edge and micro-batch. A compute action sorts
// after every transfer of its start time.
struct TimeKey {
  double time = 0;
  int compute = 0;  // 0 for a transfer, 1 for compute
  int parity = 0;   // 0..3 between neighbour ranks, 4 otherwise
  int edge = 0, micro_batch = 0, backward = 0;
  auto operator<=>(const TimeKey&) const = default;
};

// Parity class of a transfer seen from its sending rank: Megatron's even-rank order is
// send-next, recv-prev, send-prev, recv-next, and the odd-rank order matches it pairwise.
int ParityOf(int sender, int receiver) {
  if (receiver != sender + 1 && receiver != sender - 1) return 4;
  bool even = sender % 2 == 0;
  if (receiver == sender + 1) return even ? 0 : 1;  // even send-next meets odd recv-prev
  return even ? 2 : 3;
}

// Re-orders a naive lowering by the times of an eager run at `costs`. Every rank's list is
// then sorted by one global key and every action's inputs have smaller keys, so blocking
// p2p can always make progress: no deadlock under rendezvous semantics.
StatusOr<ActionSchedule> OrderByTime(ActionSchedule naive, P2POrder order,
                                     const ActionCosts& costs) {
  SimulationOptions options;
  options.costs = costs;
  options.record_timeline = true;
  PW_ASSIGN_OR_RETURN(TimedResult run, SimulateTimed(naive, options));
  EdgeIndex edges(naive);
  const int M = naive.num_micro_batches;
  // Send time of every transfer, indexed by (edge, micro-batch, direction).
  std::vector<double> sent(static_cast<size_t>(edges.num_edges()) * M * 2, 0);
  auto slot = [&](const Action& c) {
    bool backward = c.type == ActionType::kSendB || c.type == ActionType::kRecvB;
    return (static_cast<size_t>(edges.OfComm(c)) * M + c.micro_batch) * 2 + backward;
  };
  for (int r = 0; r < naive.num_ranks(); ++r)
    for (size_t i = 0; i < naive.ranks[r].size(); ++i) {
      const Action& a = naive.ranks[r][i];
      if (a.type == ActionType::kSendF || a.type == ActionType::kSendB)
        sent[slot(a)] = run.timeline[r][i].start;
    }
  std::vector<std::pair<TimeKey, Action>> keyed;
  for (int r = 0; r < naive.num_ranks(); ++r) {
    auto& actions = naive.ranks[r];
    keyed.clear();
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      TimeKey key;
      if (!IsComm(a.type)) {
        key.time = run.timeline[r][i].start;
        key.compute = 1;
      } else {
        bool backward = a.type == ActionType::kSendB || a.type == ActionType::kRecvB;
        int e = edges.OfComm(a);
        const StageEdge& edge = edges.edge(e);
        int from = naive.stage_to_rank[backward ? edge.dst : edge.src];
        int to = naive.stage_to_rank[backward ? edge.src : edge.dst];
        key.time = sent[slot(a)];
        key.parity =
            order == P2POrder::kParity || order == P2POrder::kBatched ? ParityOf(from, to) : 4;
        key.edge = e;
        key.micro_batch = a.micro_batch;
        key.backward = backward;
      }
      keyed.emplace_back(key, a);
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    actions.clear();
    std::vector<Action> run_of_comms;
    auto flush = [&] {
      if (order == P2POrder::kBatched && run_of_comms.size() > 1) {
        actions.push_back(naive.AddGroup(ActionType::kBatchP2P, run_of_comms));
      } else {
        actions.insert(actions.end(), run_of_comms.begin(), run_of_comms.end());
      }
      run_of_comms.clear();
    };
    for (const auto& [key, a] : keyed) {
      if (IsComm(a.type)) {
        run_of_comms.push_back(a);
        continue;
      }
      flush();
      actions.push_back(a);
    }
    flush();
  }
  return naive;
}

Status AlreadyLowered() { return FailedPrecondition("the schedule already has send/recv actions"); }

}  // namespace

StatusOr<ActionSchedule> InsertP2P(const ActionSchedule& compute, const P2POptions& options) {
  if (options.order == P2POrder::kTorch) {
    if (compute.HasComms()) return AlreadyLowered();
    return InsertP2PTorchOrder(options.merge_backward ? MergeBackward(compute) : compute);
  }
  if (options.order == P2POrder::kMegatron) return InsertP2PMegatronOrder(compute);
  ActionSchedule out;
  out.num_stages = compute.num_stages;
  out.num_micro_batches = compute.num_micro_batches;
  out.stage_to_rank = compute.stage_to_rank;
  out.skip_edges = compute.skip_edges;
  out.group_parts = compute.group_parts;
  out.group_begin = compute.group_begin;
  out.ranks.resize(compute.ranks.size());
  EdgeIndex edges(compute);
  // Ranks are lowered independently, so they split over the cores. The placer meets every
  // action, so it finds an already lowered one without a scan of its own.
  std::atomic<bool> lowered{false};
  ParallelFor(compute.ranks.size(), compute.num_actions(), [&](size_t begin, size_t end) {
    GapPlacer placer(compute, edges);
    for (size_t r = begin; r < end; ++r)
      if (!placer.PlaceRank(static_cast<int>(r), out.ranks[r])) lowered = true;
  });
  if (lowered) return AlreadyLowered();
  if (options.order == P2POrder::kNaive) return out;
  return OrderByTime(std::move(out), options.order, options.costs);
}

}  // namespace pw::pipeline
