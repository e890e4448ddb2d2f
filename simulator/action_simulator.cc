#include "simulator/action_simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <span>

#include "ir/action_edges.h"
#include "ir/limits.h"

namespace pw {

Status CheckActionCosts(const ActionCosts& costs) {
  auto check = [](const char* name, double value) -> Status {
    if (std::isfinite(value) && value >= 0 && value <= kMaxActionCost) return OkStatus();
    return InvalidArgument("cost ", name, "=", value, " is not a finite number in [0, ",
                           kMaxActionCost, "]");
  };
  PW_RETURN_IF_ERROR(check("F", costs.forward));
  PW_RETURN_IF_ERROR(check("B", costs.backward));
  PW_RETURN_IF_ERROR(check("W", costs.weight));
  PW_RETURN_IF_ERROR(check("comm", costs.comm));
  if (!(costs.w_mem >= 0 && costs.w_mem <= 1))
    return InvalidArgument("w-mem must be between 0 and 1 (a fraction of M_B)");
  const double largest = std::max({costs.forward, costs.backward + costs.weight});
  for (size_t s = 0; s < costs.stage_scale.size(); ++s) {
    const double scale = costs.stage_scale[s];
    if (!(std::isfinite(scale) && scale >= 0 && largest * scale <= kMaxActionCost))
      return InvalidArgument("stage ", s, "'s cost scale ", scale, " is not finite, >= 0 and ",
                             "within the cost limit ", kMaxActionCost);
  }
  return OkStatus();
}

double ActionCosts::Of(ActionType type, int stage) const {
  switch (type) {
    case ActionType::kForward:
      return forward * Scale(stage);
    case ActionType::kBackward:
      return (backward + weight) * Scale(stage);
    case ActionType::kBackwardInput:
      return backward * Scale(stage);
    case ActionType::kBackwardWeight:
      return weight * Scale(stage);
    default:
      return 0;
  }
}

const char* CommSemanticsName(CommSemantics s) {
  return s == CommSemantics::kEager ? "eager" : "rendezvous";
}

StatusOr<CommSemantics> ParseCommSemantics(const std::string& name) {
  if (name == "eager") return CommSemantics::kEager;
  if (name == "rendezvous") return CommSemantics::kRendezvous;
  return InvalidArgument("unknown comm semantics '", name, "' (known: eager, rendezvous)");
}

namespace {

// When things happened, per (stage or edge) * M + micro-batch slot: F or B ends, the
// times sends and recvs were posted.
class TimeTable {
 public:
  void Reset(size_t slots) { times_.assign(slots, kNotYet); }
  bool has(size_t slot) const { return times_[slot] != kNotYet; }
  double operator[](size_t slot) const { return times_[slot]; }  // requires has(slot)
  void Set(size_t slot, double t) { times_[slot] = t; }

 private:
  static constexpr double kNotYet = -1;
  std::vector<double> times_;
};

// What a blocked rank waits for: a kind and a flat (stage or edge) * M + micro-batch index.
// Not a char type: a store of one may alias anything, which would make the compiler reload
// every member after it.
enum class Await : int32_t {
  kNone = 0,
  kForwardDone,   // F(s, m) finished
  kBackwardDone,  // B or I (s, m) finished
  kSendF,         // SEND_F on edge e issued (posted, under rendezvous)
  kSendB,
  kRecvFPosted,  // rendezvous: RECV_F on edge e posted
  kRecvBPosted,
  // The action names a stage, micro-batch, edge or fused group the schedule does not have.
  // Nothing produces it: the rank stops there, and Run reports the action.
  kMalformed,
};

struct Key {
  Await what = Await::kNone;
  int64_t index = 0;
  bool operator==(const Key&) const = default;
};

// Replays every rank's list in order, each rank running until it must wait for another,
// and resuming when that other produces what it waits for. Each action runs once and each
// wake-up is O(1), so a replay is linear in the number of actions.
class Replay {
 public:
  Replay(const ActionSchedule& schedule, const SimulationOptions& options, bool timed)
      : s_(schedule),
        edges_(schedule),
        costs_(options.costs),
        rendezvous_(options.semantics == CommSemantics::kRendezvous),
        timed_(timed),
        record_(options.record_timeline),
        M_(schedule.num_micro_batches),
        S_(schedule.num_stages),
        R_(schedule.num_ranks()),
        comm_mode_(schedule.HasComms()),
        rank_of_(schedule.stage_to_rank) {
    for (int t = 0; t <= static_cast<int>(ActionType::kBatchP2P); ++t)
      unit_cost_[t] = timed ? costs_.Of(static_cast<ActionType>(t), -1) : 0;
  }

  // Safe on a schedule the structure rules have not checked yet (the checker runs them
  // beside the replay): an action outside the schedule's frame stops its rank with an
  // error instead of indexing out of bounds.
  Status Run() {
    PW_RETURN_IF_ERROR(CheckScheduleShape(s_));
    for (int s = 0; s + 1 < S_; ++s) chain_latency_.push_back(Cross(s, s + 1));
    // Chain edge s-1 -> s is implicit without comm actions; with them, only a same-rank
    // hand-over (the V turn) is. Only implicit edges read the F and B end times.
    implicit_in_.assign(S_ + 1, 0);
    for (int s = 1; s < S_; ++s) {
      implicit_in_[s] = !comm_mode_ || rank_of_[s - 1] == rank_of_[s];
      any_implicit_ |= implicit_in_[s] != 0;
    }
    const size_t stage_slots = static_cast<size_t>(S_) * M_;
    const size_t edge_slots = static_cast<size_t>(edges_.num_edges()) * M_;
    if (any_implicit_) {
      f_end_.Reset(stage_slots);
      b_end_.Reset(stage_slots);
    }
    if (comm_mode_) {
      send_f_.Reset(edge_slots);
      send_b_.Reset(edge_slots);
      if (rendezvous_) {
        recv_f_.Reset(edge_slots);
        recv_b_.Reset(edge_slots);
      }
    }
    ranks_.assign(R_, RankState{});
    if (record_) {
      result_.timeline.resize(R_);
      for (int r = 0; r < R_; ++r) result_.timeline[r].resize(s_.ranks[r].size());
    }
    // A rank is in the stack only while it is neither blocked nor running, so R slots hold
    // them all; one more takes Produce's write when it wakes no one.
    work_.resize(R_ + 1);
    for (int r = 0; r < R_; ++r) work_[r] = R_ - 1 - r;
    work_size_ = R_;
    while (work_size_ > 0) Advance(work_[--work_size_]);
    for (int r = 0; r < R_; ++r)
      if (ranks_[r].pos < s_.ranks[r].size() && ranks_[r].blocked.what == Await::kMalformed)
        return InvalidArgument("rank ", r, ", action ", ranks_[r].pos,
                               ": names a stage, micro-batch, edge or fused group the schedule "
                               "does not have");
    for (int r = 0; r < R_; ++r)
      if (ranks_[r].pos < s_.ranks[r].size()) return DeadlockError(r);
    if (timed_) Summarize();
    return OkStatus();
  }

  TimedResult& result() { return result_; }

 private:
  // What a rank computed so far.
  struct Stats {
    double busy = 0, first_start = std::numeric_limits<double>::infinity(), last_end = 0;
    double mem = 0, peak = 0;
  };
  struct RankState {
    size_t pos = 0;
    double clock = 0;
    Stats stats;
    Key blocked;
  };

  double Cross(int a, int b) const { return rank_of_[a] == rank_of_[b] ? 0 : costs_.comm; }
  size_t Slot(int stage_or_edge, int mb) const {
    return static_cast<size_t>(stage_or_edge) * M_ + mb;
  }

  // Wakes the consumer if it waits for `key`. Without a branch: whether a peer already
  // waits is close to random, so a branch on it would often be mispredicted.
  [[gnu::always_inline]] void Produce(int consumer_rank, Key key) {
    RankState& q = ranks_[consumer_rank];
    const bool wakes = q.blocked == key;
    work_[work_size_] = consumer_rank;
    work_size_ += wakes;
    q.blocked.what = wakes ? Await::kNone : q.blocked.what;
  }

  // Runs rank r until it finishes or must wait. Its position and clock live in locals
  // while it runs: the tables hold doubles too, so a store to them would otherwise make
  // the compiler reload the clock from memory after every action.
  void Advance(int r) {
    RankState& rank = ranks_[r];
    const Action* actions = s_.ranks[r].data();
    const size_t n = s_.ranks[r].size();
    ActionTime* times = record_ ? result_.timeline[r].data() : nullptr;
    size_t pos = rank.pos;
    double clock = rank.clock;
    Key wait;
    for (; pos < n; ++pos) {
      const Action& a = actions[pos];
      // Ranks take turns every few actions, too many interleaved streams for the hardware
      // prefetcher: fetch this rank's next lines ahead by hand.
      __builtin_prefetch(&actions[std::min(pos + 24, n - 1)]);
      const double before = clock;
      double start = before;
      if (!Step(a, rank.stats, clock, start, wait)) break;
      if (times) times[pos] = {IsComm(a.type) ? before : start, clock};
    }
    rank.pos = pos;
    rank.clock = clock;
    if (pos < n) rank.blocked = wait;
  }

  // Runs one action, or returns false with the key it awaits. Single compute actions and
  // eager sends/recvs between adjacent stages, nearly all actions, take the short paths.
  [[gnu::always_inline]] bool Step(const Action& a, Stats& stats, double& clock, double& start,
                                   Key& wait) {
    switch (a.type) {
      case ActionType::kForward:
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
      case ActionType::kBackwardWeight:
        if (!InFrame(a)) return Malformed(wait);
        if (!InputsReady(a, start, wait)) return false;
        clock = Run(stats, start, Cost(a));
        Finish(stats, a, clock);
        return true;
      case ActionType::kSendF:
      case ActionType::kSendB:
        if (a.peer >= 0 || rendezvous_) break;
        return PostChainSend(a, clock, wait);
      case ActionType::kRecvF:
      case ActionType::kRecvB:
        if (a.peer >= 0 || rendezvous_) break;
        return ReceiveChain(a, clock, wait);
      case ActionType::kIdle:
        return true;
      case ActionType::kOverlapFB:
        return ComputeFused(a, stats, clock, start, wait);
      case ActionType::kBatchP2P:
        break;
    }
    return Communicate(a, clock, wait);
  }

  // Earliest start of compute part p given its inputs (`ready` starts as the rank's clock),
  // or false with the key it awaits. A part's own stage runs on its rank, so the list
  // order (checked by the structure rules) already puts F before B or I, and I before W.
  [[gnu::always_inline]] bool InputsReady(const Action& p, double& ready, Key& wait) const {
    const int s = p.stage, m = p.micro_batch;
    switch (p.type) {
      case ActionType::kForward: {
        if (!implicit_in_[s]) return true;
        const size_t slot = Slot(s - 1, m);
        if (!f_end_.has(slot)) {
          wait = {Await::kForwardDone, static_cast<int64_t>(slot)};
          return false;
        }
        ready = std::max(ready, f_end_[slot] + chain_latency_[s - 1]);
        return true;
      }
      case ActionType::kBackward:
      case ActionType::kBackwardInput: {
        if (!implicit_in_[s + 1]) return true;
        const size_t slot = Slot(s + 1, m);
        if (!b_end_.has(slot)) {
          wait = {Await::kBackwardDone, static_cast<int64_t>(slot)};
          return false;
        }
        ready = std::max(ready, b_end_[slot] + chain_latency_[s]);
        return true;
      }
      default:
        return true;
    }
  }

  double Cost(const Action& a) const {
    double unit = unit_cost_[static_cast<int>(a.type)];
    return costs_.stage_scale.empty() ? unit : unit * costs_.Scale(a.stage);
  }

  // Computes from `start` for `duration`; returns the end.
  double Run(Stats& stats, double start, double duration) const {
    const double end = start + duration;
    if (timed_ && duration > 0) {
      stats.busy += duration;
      stats.first_start = std::min(stats.first_start, start);
      stats.last_end = end;
    }
    return end;
  }

  static bool Malformed(Key& wait) {
    wait = {Await::kMalformed, 0};
    return false;
  }
  bool InFrame(const Action& p) const {
    return static_cast<unsigned>(p.stage) < static_cast<unsigned>(S_) &&
           static_cast<unsigned>(p.micro_batch) < static_cast<unsigned>(M_);
  }
  // Whether a fused action names a group (the shape check vouched for the groups).
  bool HasGroup(const Action& a) const {
    return static_cast<unsigned>(a.micro_batch) + 1 < s_.group_begin.size();
  }

  // A fused OVERLAP_F_B: its parts start together once all their inputs are ready.
  bool ComputeFused(const Action& a, Stats& stats, double& clock, double& start, Key& wait) {
    if (!HasGroup(a)) return Malformed(wait);
    // Every part is checked before any waits, so a bad part is reported, not a deadlock.
    for (const Action& p : s_.Parts(a))
      if (!IsCompute(p.type) || !InFrame(p)) return Malformed(wait);
    for (const Action& p : s_.Parts(a))
      if (!InputsReady(p, start, wait)) return false;
    double duration = 0;
    for (const Action& p : s_.Parts(a)) duration += Cost(p);
    clock = Run(stats, start, duration);
    for (const Action& p : s_.Parts(a)) Finish(stats, p, clock);
    return true;
  }

  // Records a finished compute part and wakes whoever waits for it.
  [[gnu::always_inline]] void Finish(Stats& rank, const Action& p, double end) {
    const int s = p.stage, m = p.micro_batch;
    switch (p.type) {
      case ActionType::kForward:
        rank.mem += 1;
        rank.peak = std::max(rank.peak, rank.mem);
        if (implicit_in_[s + 1]) {
          f_end_.Set(Slot(s, m), end);
          Produce(rank_of_[s + 1], {Await::kForwardDone, static_cast<int64_t>(Slot(s, m))});
        }
        break;
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
        rank.mem -= p.type == ActionType::kBackward ? 1 : 1 - costs_.w_mem;
        if (implicit_in_[s]) {
          b_end_.Set(Slot(s, m), end);
          Produce(rank_of_[s - 1], {Await::kBackwardDone, static_cast<int64_t>(Slot(s, m))});
        }
        break;
      case ActionType::kBackwardWeight:
        rank.mem -= costs_.w_mem;
        break;
      default:
        break;
    }
  }

  // Post and Completion for an eager SEND_F/SEND_B to the adjacent stage.
  bool PostChainSend(const Action& a, double now, Key& wait) {
    const bool forward = a.type == ActionType::kSendF;
    const int e = forward ? a.stage : a.stage - 1;
    if (!ChainInFrame(e, a.micro_batch)) return Malformed(wait);
    const size_t slot = Slot(e, a.micro_batch);
    TimeTable& sent = forward ? send_f_ : send_b_;
    if (sent.has(slot)) return true;
    sent.Set(slot, now);
    Produce(rank_of_[forward ? a.stage + 1 : a.stage - 1],
            {forward ? Await::kSendF : Await::kSendB, static_cast<int64_t>(slot)});
    return true;
  }
  bool ChainInFrame(int e, int m) const {
    return static_cast<unsigned>(e) < static_cast<unsigned>(S_ - 1) &&
           static_cast<unsigned>(m) < static_cast<unsigned>(M_);
  }

  // Post and Completion for an eager RECV_F/RECV_B from the adjacent stage.
  bool ReceiveChain(const Action& a, double& clock, Key& wait) const {
    const bool forward = a.type == ActionType::kRecvF;
    const int e = forward ? a.stage - 1 : a.stage;
    if (!ChainInFrame(e, a.micro_batch)) return Malformed(wait);
    const size_t slot = Slot(e, a.micro_batch);
    const TimeTable& sent = forward ? send_f_ : send_b_;
    if (!sent.has(slot)) {
      wait = {forward ? Await::kSendF : Await::kSendB, static_cast<int64_t>(slot)};
      return false;
    }
    clock = std::max(clock, std::max(0.0, sent[slot]) + chain_latency_[e]);
    return true;
  }

  // The edge of a send/recv: the chain edge directly when the peer is adjacent.
  // -1 when it names no edge.
  int ChainOrFind(const Action& a) const {
    if (a.peer < 0) {
      bool from_lower = a.type == ActionType::kRecvF || a.type == ActionType::kSendB;
      const int e = from_lower ? a.stage - 1 : a.stage;
      return e >= 0 && e < S_ - 1 ? e : -1;
    }
    return edges_.OfComm(a);
  }

  // Owner rank of the receiving / sending end of edge e.
  int DstRank(int e) const { return rank_of_[edges_.edge(e).dst]; }
  int SrcRank(int e) const { return rank_of_[edges_.edge(e).src]; }

  // Posts a send or recv (idempotent) and wakes a peer waiting for the post.
  void Post(const Action& p, int e, double now) {
    const size_t slot = Slot(e, p.micro_batch);
    const int64_t key = static_cast<int64_t>(slot);
    switch (p.type) {
      case ActionType::kSendF:
        if (send_f_.has(slot)) return;
        send_f_.Set(slot, now);
        Produce(DstRank(e), {Await::kSendF, key});
        return;
      case ActionType::kSendB:
        if (send_b_.has(slot)) return;
        send_b_.Set(slot, now);
        Produce(SrcRank(e), {Await::kSendB, key});
        return;
      case ActionType::kRecvF:
        if (!rendezvous_ || recv_f_.has(slot)) return;
        recv_f_.Set(slot, now);
        Produce(SrcRank(e), {Await::kRecvFPosted, key});
        return;
      case ActionType::kRecvB:
        if (!rendezvous_ || recv_b_.has(slot)) return;
        recv_b_.Set(slot, now);
        Produce(DstRank(e), {Await::kRecvBPosted, key});
        return;
      default:
        return;
    }
  }

  // When a posted send/recv completes, or false with the key it awaits.
  bool Completion(const Action& p, int e, double& done, Key& wait) const {
    const size_t slot = Slot(e, p.micro_batch);
    const int64_t key = static_cast<int64_t>(slot);
    // A posted send or recv has its own time set; the peer's may not be yet.
    double own = 0;
    const TimeTable* peer = nullptr;
    switch (p.type) {
      case ActionType::kSendF:
        if (!rendezvous_) {
          done = send_f_[slot];
          return true;
        }
        own = send_f_[slot];
        peer = &recv_f_;
        wait = {Await::kRecvFPosted, key};
        break;
      case ActionType::kSendB:
        if (!rendezvous_) {
          done = send_b_[slot];
          return true;
        }
        own = send_b_[slot];
        peer = &recv_b_;
        wait = {Await::kRecvBPosted, key};
        break;
      case ActionType::kRecvF:
        own = rendezvous_ ? recv_f_[slot] : 0;
        peer = &send_f_;
        wait = {Await::kSendF, key};
        break;
      default:  // kRecvB
        own = rendezvous_ ? recv_b_[slot] : 0;
        peer = &send_b_;
        wait = {Await::kSendB, key};
        break;
    }
    if (!peer->has(slot)) return false;
    const StageEdge& edge = edges_.edge(e);
    done = std::max(own, (*peer)[slot]) + Cross(edge.src, edge.dst);
    return true;
  }

  // Any send/recv or BATCH_P2P group: posts every part, then waits for all of them.
  bool Communicate(const Action& a, double& clock, Key& wait) {
    if (IsFused(a.type) && !HasGroup(a)) return Malformed(wait);
    for (const Action& p : s_.Parts(a)) {
      const int e = ChainOrFind(p);
      if (!IsComm(p.type) || e < 0 || !InFrame(p)) return Malformed(wait);
      Post(p, e, clock);
    }
    double done = clock;
    for (const Action& p : s_.Parts(a)) {
      double t = 0;
      if (!Completion(p, ChainOrFind(p), t, wait)) return false;
      // An eager send does not hold its rank; everything else does until it completes.
      bool holds = rendezvous_ || p.type == ActionType::kRecvF || p.type == ActionType::kRecvB;
      if (holds) done = std::max(done, t);
    }
    clock = done;
    return true;
  }

  void Summarize() {
    TimedResult& out = result_;
    out.ranks.resize(R_);
    double total_busy = 0;
    for (int r = 0; r < R_; ++r) {
      const Stats& rank = ranks_[r].stats;
      RankStats& st = out.ranks[r];
      st.busy = rank.busy;
      st.first_start = rank.busy > 0 ? rank.first_start : 0;
      st.last_end = rank.last_end;
      st.peak_activations = rank.peak;
      out.makespan = std::max(out.makespan, rank.last_end);
      out.cost = std::max(out.cost, st.span());
      total_busy += rank.busy;
    }
    for (RankStats& st : out.ranks) st.idle = out.makespan - st.busy;
    out.ideal = R_ > 0 ? total_busy / R_ : 0;
    out.bubble_rate = out.cost > 0 ? (out.cost - out.ideal) / out.cost : 0;
  }

  // The action that produces `key`, and the rank that runs it.
  std::pair<int, Action> Producer(Key key) const {
    const int index = static_cast<int>(key.index / M_);
    const int m = static_cast<int>(key.index % M_);
    auto edge_action = [&](ActionType t, int stage, int peer_stage, bool adjacent) {
      return MakeAction(t, stage, m, adjacent ? -1 : peer_stage);
    };
    switch (key.what) {
      case Await::kForwardDone:
        return {rank_of_[index], MakeAction(ActionType::kForward, index, m)};
      case Await::kBackwardDone:
        return {rank_of_[index], MakeAction(ActionType::kBackward, index, m)};
      default:
        break;
    }
    const StageEdge& e = edges_.edge(index);
    const bool adjacent = e.dst == e.src + 1;
    switch (key.what) {
      case Await::kSendF:
        return {SrcRank(index), edge_action(ActionType::kSendF, e.src, e.dst, adjacent)};
      case Await::kSendB:
        return {DstRank(index), edge_action(ActionType::kSendB, e.dst, e.src, adjacent)};
      case Await::kRecvFPosted:
        return {DstRank(index), edge_action(ActionType::kRecvF, e.dst, e.src, adjacent)};
      default:
        return {SrcRank(index), edge_action(ActionType::kRecvB, e.src, e.dst, adjacent)};
    }
  }

  // Whether rank q still has `wanted` (a B also matches an I) at or after its position.
  bool StillAhead(int q, const Action& wanted) const {
    const auto& actions = s_.ranks[q];
    for (size_t i = ranks_[q].pos; i < actions.size(); ++i) {
      if (IsFused(actions[i].type) && !HasGroup(actions[i])) continue;
      for (const Action& p : s_.Parts(actions[i])) {
        bool same_type = p.type == wanted.type ||
                         (wanted.type == ActionType::kBackward && IsInputBackward(p.type));
        if (same_type && p.stage == wanted.stage && p.micro_batch == wanted.micro_batch &&
            (!IsComm(p.type) || p.peer == wanted.peer))
          return true;
      }
    }
    return false;
  }

  // Follows "waits for" from a blocked rank until a rank repeats: that loop is the cycle.
  Status DeadlockError(int first) const {
    std::vector<int> order;
    std::vector<int> seen(R_, -1);
    int r = first;
    std::string missing;
    while (seen[r] < 0) {
      seen[r] = static_cast<int>(order.size());
      order.push_back(r);
      auto [q, wanted] = Producer(ranks_[r].blocked);
      if (q == r && !StillAhead(q, wanted)) {
        missing = StrCat(" (", ActionToString(wanted, s_), " is not in its list)");
        break;
      }
      if (!StillAhead(q, wanted) || ranks_[q].pos >= s_.ranks[q].size()) {
        missing = StrCat("; rank ", q, " never runs ", ActionToString(wanted, s_), " after ",
                         "its current position");
        break;
      }
      r = q;
    }
    const size_t begin = missing.empty() ? static_cast<size_t>(seen[r]) : 0;
    std::string msg = "deadlock: ";
    for (size_t i = begin; i < order.size(); ++i) {
      int x = order[i];
      auto [q, wanted] = Producer(ranks_[x].blocked);
      if (i > begin) msg += ", ";
      msg += StrCat("rank ", x, " waits at ", ActionToString(s_.ranks[x][ranks_[x].pos], s_),
                    " for ", ActionToString(wanted, s_), " on rank ", q);
    }
    msg += missing;
    if (missing.empty()) msg += " (cycle)";
    return FailedPrecondition(msg);
  }

  const ActionSchedule& s_;
  EdgeIndex edges_;
  const ActionCosts& costs_;
  const bool rendezvous_, timed_, record_;
  const int M_, S_, R_;
  const bool comm_mode_;
  const std::vector<int> rank_of_;
  std::vector<double> chain_latency_;  // comm cost of chain edge s -> s + 1 (0 on one rank)
  std::vector<uint8_t> implicit_in_;   // per stage (and one past): edge s-1 -> s is implicit
  bool any_implicit_ = false;
  TimeTable f_end_, b_end_, send_f_, send_b_, recv_f_, recv_b_;
  double unit_cost_[static_cast<int>(ActionType::kBatchP2P) + 1] = {};
  std::vector<RankState> ranks_;
  std::vector<int> work_;  // ranks ready to run, a stack of work_size_
  int work_size_ = 0;
  TimedResult result_;
};

}  // namespace

StatusOr<TimedResult> SimulateTimed(const ActionSchedule& schedule,
                                    const SimulationOptions& options) {
  PW_RETURN_IF_ERROR(CheckActionCosts(options.costs));
  Replay replay(schedule, options, /*timed=*/true);
  PW_RETURN_IF_ERROR(replay.Run());
  return std::move(replay.result());
}

Status CheckDeadlockFree(const ActionSchedule& schedule, CommSemantics semantics) {
  SimulationOptions options;
  options.semantics = semantics;
  return Replay(schedule, options, /*timed=*/false).Run();
}

namespace {

// PyTorch's unit-step rules over flat flag tables (one byte per stage or edge and
// micro-batch) instead of per-rank sets of actions.
class UnitSteps {
 public:
  explicit UnitSteps(const ActionSchedule& schedule)
      : s_(schedule),
        edges_(schedule),
        M_(schedule.num_micro_batches),
        comm_mode_(schedule.HasComms()) {}

  StatusOr<UnitStepResult> Run() {
    const int R = s_.num_ranks();
    stage_done_.assign(static_cast<size_t>(s_.num_stages) * M_, 0);
    edge_done_.assign(static_cast<size_t>(edges_.num_edges()) * M_, 0);
    // Idle cells in the input are dropped first, as PyTorch does.
    std::vector<std::vector<Action>> todo(R);
    for (int r = 0; r < R; ++r)
      for (const Action& a : s_.ranks[r])
        if (a.type != ActionType::kIdle) todo[r].push_back(a);
    std::vector<size_t> pos(R, 0);
    std::vector<int> active;
    for (int r = 0; r < R; ++r)
      if (!todo[r].empty()) active.push_back(r);
    UnitStepResult result;
    result.steps.resize(R);
    auto drop_finished = [&] {
      std::erase_if(active, [&](int r) { return pos[r] >= todo[r].size(); });
    };
    while (!active.empty()) {
      bool progress = false;
      for (int r : active) {
        const Action& a = todo[r][pos[r]];
        if (Ready(a)) {
          Mark(a);
          result.steps[r].push_back(a);
          ++pos[r];
          progress = true;
        } else {
          result.steps[r].push_back(Action{});
        }
      }
      drop_finished();
      // A rank that waited this step may run if a later rank just unblocked it.
      for (int r : active) {
        if (result.steps[r].back().type != ActionType::kIdle) continue;
        const Action& a = todo[r][pos[r]];
        if (!Ready(a)) continue;
        Mark(a);
        result.steps[r].back() = a;
        ++pos[r];
      }
      drop_finished();
      if (!progress) {
        Status deadlock = CheckDeadlockFree(s_, CommSemantics::kEager);
        if (!deadlock.ok()) return deadlock;
        return FailedPrecondition("unit-step simulation stalled at step ",
                                  result.steps[active.front()].size() - 1);
      }
    }
    for (const auto& steps : result.steps)
      result.num_steps = std::max(result.num_steps, static_cast<int>(steps.size()));
    return result;
  }

 private:
  enum : uint8_t { kF = 1, kInputGrad = 2, kW = 4 };
  enum : uint8_t { kSentF = 1, kRecvdF = 2, kSentB = 4, kRecvdB = 8 };

  uint8_t& StageFlags(int s, int m) { return stage_done_[static_cast<size_t>(s) * M_ + m]; }
  uint8_t& EdgeFlags(int e, int m) { return edge_done_[static_cast<size_t>(e) * M_ + m]; }
  bool SameRank(int a, int b) const { return s_.stage_to_rank[a] == s_.stage_to_rank[b]; }

  bool PartReady(const Action& p) {
    const int s = p.stage, m = p.micro_batch;
    switch (p.type) {
      case ActionType::kForward:
        for (int e : edges_.InEdges(s)) {
          int src = edges_.edge(e).src;
          bool ok = (!comm_mode_ || SameRank(src, s)) ? (StageFlags(src, m) & kF)
                                                      : (EdgeFlags(e, m) & kRecvdF);
          if (!ok) return false;
        }
        return true;
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
        for (int e : edges_.OutEdges(s)) {
          int dst = edges_.edge(e).dst;
          bool ok = (!comm_mode_ || SameRank(dst, s)) ? (StageFlags(dst, m) & kInputGrad)
                                                      : (EdgeFlags(e, m) & kRecvdB);
          if (!ok) return false;
        }
        return true;
      case ActionType::kBackwardWeight:
        return true;
      case ActionType::kSendF:
        return StageFlags(s, m) & kF;
      case ActionType::kSendB:
        return StageFlags(s, m) & kInputGrad;
      case ActionType::kRecvF:
        return EdgeFlags(edges_.OfComm(p), m) & kSentF;
      case ActionType::kRecvB:
        return EdgeFlags(edges_.OfComm(p), m) & kSentB;
      default:
        return true;
    }
  }

  bool Ready(const Action& a) {
    for (const Action& p : s_.Parts(a))
      if (!PartReady(p)) return false;
    return true;
  }

  void Mark(const Action& a) {
    for (const Action& p : s_.Parts(a)) {
      const int m = p.micro_batch;
      switch (p.type) {
        case ActionType::kForward:
          StageFlags(p.stage, m) |= kF;
          break;
        case ActionType::kBackward:
        case ActionType::kBackwardInput:
          StageFlags(p.stage, m) |= kInputGrad;
          break;
        case ActionType::kBackwardWeight:
          StageFlags(p.stage, m) |= kW;
          break;
        case ActionType::kSendF:
          EdgeFlags(edges_.OfComm(p), m) |= kSentF;
          break;
        case ActionType::kRecvF:
          EdgeFlags(edges_.OfComm(p), m) |= kRecvdF;
          break;
        case ActionType::kSendB:
          EdgeFlags(edges_.OfComm(p), m) |= kSentB;
          break;
        case ActionType::kRecvB:
          EdgeFlags(edges_.OfComm(p), m) |= kRecvdB;
          break;
        default:
          break;
      }
    }
  }

  const ActionSchedule& s_;
  EdgeIndex edges_;
  const int M_;
  const bool comm_mode_;
  std::vector<uint8_t> stage_done_, edge_done_;
};

}  // namespace

StatusOr<UnitStepResult> SimulateUnitSteps(const ActionSchedule& schedule) {
  return UnitSteps(schedule).Run();
}

std::string FormatStepTable(const UnitStepResult& result, const ActionSchedule& schedule) {
  const int R = static_cast<int>(result.steps.size());
  const int steps = result.num_steps;
  const size_t digits = std::to_string(std::max(steps - 1, 0)).size();
  auto step_label = [&](int i) {
    std::string n = std::to_string(i);
    return "Step " + std::string(digits > n.size() ? digits - n.size() : 0, '0') + n;
  };
  const size_t label_width = 5 + digits;
  std::vector<std::vector<std::string>> cells(R);
  std::vector<size_t> width(R, label_width);
  for (int r = 0; r < R; ++r) {
    for (const Action& a : result.steps[r]) {
      cells[r].push_back(ActionToString(a, schedule));
      width[r] = std::max(width[r], cells[r].back().size());
    }
  }
  auto pad = [](std::string& out, const std::string& text, size_t w) {
    out += text;
    if (text.size() < w) out.append(w - text.size(), ' ');
  };
  std::string out(label_width + 2, ' ');
  for (int r = 0; r < R; ++r) {
    if (r) out += ' ';
    pad(out, "Rank " + std::to_string(r), width[r]);
  }
  out += '\n';
  static const std::string kEmpty;
  for (int i = 0; i < steps; ++i) {
    out += step_label(i) + ": ";
    for (int r = 0; r < R; ++r) {
      if (r) out += ' ';
      pad(out, i < static_cast<int>(cells[r].size()) ? cells[r][i] : kEmpty, width[r]);
    }
    out += '\n';
  }
  return out;
}

std::vector<double> PeakActivations(const ActionSchedule& schedule, double w_mem) {
  std::vector<double> peaks(schedule.num_ranks(), 0);
  for (int r = 0; r < schedule.num_ranks(); ++r) {
    double mem = 0;
    for (const Action& a : schedule.ranks[r])
      for (const Action& p : schedule.Parts(a)) {
        switch (p.type) {
          case ActionType::kForward:
            mem += 1;
            break;
          case ActionType::kBackward:
            mem -= 1;
            break;
          case ActionType::kBackwardInput:
            mem -= 1 - w_mem;
            break;
          case ActionType::kBackwardWeight:
            mem -= w_mem;
            break;
          default:
            break;
        }
        peaks[r] = std::max(peaks[r], mem);
      }
  }
  return peaks;
}

}  // namespace pw
