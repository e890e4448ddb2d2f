#include "simulator/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>

#include "ir/stream_spin.h"
#include "simulator/core_turns.h"
#include "simulator/interval_set.h"
#include "simulator/memory_fit.h"
#include "simulator/repeat_steps.h"

namespace pw::cost {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Running work: a compute instruction, a transfer or a collective.
struct Activity {
  double work = 0;  // seconds left at rate 1
  double total = 0;
  double began = 0;
  bool compute = false;
  std::vector<int> ranks;   // ranks taking part
  std::vector<int> finish;  // instructions that finish with it
  double threads = 1;       // compute: the threads it keeps busy
  int recv = -1;            // eager transfer: the recv waiting for it
  // Communication: the instruction that prices it; its work is the fraction left, done at
  // a rate of 1 / (its time under the node's current load).
  const SimInstr* comm = nullptr;
  double seconds = 0;  // its time without a CommModel
  double rate = 1;
  double comm_threads = 0;  // communication: the cores it keeps busy on each member's node
  double latency = 0;       // communication: the part of its time that sharing links leaves
  double ends = 0;          // when it ends at its current rate (AdvanceToNextEvent)
  // A collective: waits for its measured straggle (a member's thread was woken for it);
  // not priced yet (whether its ranks compute beside it is known once the instructions
  // that start at its launch have started).
  bool straggles = true;
  bool unpriced = false;
  bool done = false;      // completed; removed from the running set after the sweep
  double cpu = 0;         // CPU seconds its thread has used (each member's, for communication)
  double core_share = 0;  // compute: the share of a core each of its threads holds
  bool got_core = false;  // compute in turns (core_turns.h): its thread has had a core
};

class Engine {
 public:
  Engine(const SimGraph& g, const DeviceSpec& d, const SimOptions& o, const CommModel* comm)
      : g_(g),
        dev_(d),
        opt_(o),
        comm_(comm),
        n_(static_cast<int>(g.instrs.size())),
        compute_threads_(std::max(1, o.compute_threads)),
        op_overhead_(o.op_overhead >= 0 ? o.op_overhead : d.op_overhead()) {}

  StatusOr<SimResult> Run();

 private:
  void Prepare();
  void Ready(int i);
  void Start(int i);
  void Finish(int i);
  // The host issues `rank`'s `step` (RepeatSteps): its previous step has finished.
  void IssueStep(int rank, int step);
  size_t StepIndex(int rank, int step) const { return static_cast<size_t>(rank) * g_.steps + step; }
  // A thread of `rank` that waited for another stream's or rank's event resumes, costing
  // the node `cpu` (WakeCpu).
  void Wake(int rank, double cpu);
  // The CPU a wake-up of `waiter`'s stream costs: wait_cpu, but nothing for a sending
  // stream whose transfers are charged transfer_cpu (its wake-up is part of that).
  double WakeCpu(const SimInstr& waiter) const {
    return waiter.kind == InstrKind::kSend && ChargesTransfers() ? 0 : dev_.wait_cpu();
  }
  // Takes `seconds` of CPU from `rank`'s node beside its ranks' work (a wake-up, a transfer's
  // threads): it delays nothing by itself, and costs nothing while a core is free.
  void ChargeCpu(int rank, double seconds);
  // Pipeline transfers are charged their measured transfer_cpu (DeviceSpec).
  bool ChargesTransfers() const { return dev_.transfer_cpu() > 0 && dev_.cores_per_node() > 0; }
  void Launch(Activity a);
  void CompleteActivity(Activity& a);
  // Starts every instruction whose issue time has come; whether it started any.
  bool StartReadyInstructions();
  // Completes every activity with no work left; whether it completed any.
  bool CompleteFinishedActivities();
  // Moves time to the next event: the earliest issue time or activity end. The activities
  // that end there complete, whatever rounding left of their work, so every step of the
  // loop starts an instruction or completes an activity.
  Status AdvanceToNextEvent();
  void ComputeRates();
  void ShareLinks();
  // Compute threads running on `rank`'s node, and whether they fill its cores.
  double NodeComputeDemand(int rank) const { return node_compute_threads_[Node(rank)]; }
  // A collective whose members wait on their compute streams, on a node whose ranks'
  // threads outnumber its cores: the ranks take turns on the cores, and a member's wait for
  // the others is the core it leaves them (see the straggle in simulator.h).
  bool TakesTurns(const SimInstr& in) const {
    return in.stream == StreamType::kCompute && dev_.cores_per_node() > 0 &&
           node_ranks_[Node(in.rank)] * compute_threads_ > dev_.cores_per_node();
  }
  // RankResult::cpu is known where each op's thread holds its share of a core: an op on
  // several kernel threads keeps them busy only as far as it is parallel.
  bool CountsCpu() const { return dev_.cores_per_node() > 0 && compute_threads_ == 1; }
  bool NodeBusy(int rank) const {
    return dev_.cores_per_node() > 0 && NodeComputeDemand(rank) >= dev_.cores_per_node();
  }
  // A transfer's or collective's time (and CPU) under the current load of its ranks' nodes.
  // `bytes` < 0: the instruction's own; 0 gives its fixed cost (latency) alone.
  CommEstimate CommPrice(const SimInstr& in, double fallback, const std::vector<int>& ranks,
                         double bytes = -1) const;
  int BusyCores(const std::vector<int>& ranks) const;
  void StartComm(Activity& a, const SimInstr& in, double seconds) const {
    a.comm = &in;
    a.seconds = seconds;
    a.work = CommPrice(in, seconds, a.ranks).seconds > 0 ? 1.0 : 0.0;
  }
  Status Deadlock() const;
  // Fails when the step or a rank's peak memory has no finite value.
  Status Report(SimResult& out) const;

  int Node(int rank) const { return dev_.ranks_per_node() > 0 ? rank / dev_.ranks_per_node() : 0; }

  const SimGraph& g_;
  const DeviceSpec& dev_;
  const SimOptions& opt_;
  const CommModel* comm_;
  const int n_;
  const int compute_threads_;
  const double op_overhead_;

  double now_ = 0;
  int done_ = 0;
  std::vector<int> pending_;  // unfinished predecessors
  std::vector<std::vector<int>> succ_;
  std::vector<double> earliest_;
  std::vector<InstrTime> t_;
  std::vector<double> transfer_end_;  // eager sends: when the data arrived
  // When instruction i's work ended: a send's transfer, anything else its finish.
  double TransferEnd(int i) const;
  std::vector<bool> posted_, finished_, arrived_;
  std::vector<int> joined_;  // per collective: members that reached it
  // Its stream's thread reached it before its inputs from another stream or rank were ready.
  std::vector<bool> waiting_;
  std::vector<double> wait_since_;  // when its thread began to wait (waiting_)
  std::vector<bool> woken_;         // its thread blocked in that wait and was woken
  // Per rank and stream: how its waits on other streams' events went, by the executor's
  // rule (SpinHistory, with long_spin_budget).
  std::vector<SpinHistory> spin_history_;
  // The executor's CPU streams spin on events before they block (DeviceSpec.spin_budget);
  // its pipeline transfer streams block at once.
  bool SpinsOnEvents(StreamType stream) const {
    return dev_.cores_per_node() > 0 && dev_.spin_budget() > 0 && StreamSpinsOnEvents(stream);
  }
  int StreamKey(int rank, StreamType stream) const {
    return rank * kNumStreamTypes + StreamIndex(stream);
  }
  // Per rank and stream: the instruction its thread waits at (waiting_), or -1.
  std::vector<int> waiting_on_;
  // The spin of a stream's thread now (the executor's AdaptiveSpin, from its history).
  double SpinBudget(int key) const;
  // Per node: the threads its running activities keep busy, compute's and communication's
  // (its share of a core on each member's node).
  struct NodeLoad {
    double compute = 0;
    double comm = 0;
    double threads() const { return compute + comm; }
  };
  std::vector<NodeLoad> NodeDemand() const;
  // ComputeRates' compute where the node's cores are taken in turns (core_turns.h).
  void TakeTurns(const std::vector<NodeLoad>& demand);
  // The rate of each compute thread of a node under `load`.
  double ComputeRate(const NodeLoad& load) const;
  // The cores the node's threads get under `load`, less what its communication keeps.
  double ComputeCores(const NodeLoad& load) const;
  // Stream threads of `rank`'s node that wait for an event and are still spinning.
  int SpinningThreads(int rank) const;
  // The delay from an event of `from` to the instruction `to` of another stream starting,
  // as its stream's thread waits for it; counts a wake-up where the thread had blocked.
  // None for a thread of the same rank that spins on events (see Resume).
  std::optional<double> HandOff(const SimInstr& from, int to);
  // A stream thread of the rank that recorded the event resumes: caught spinning, or woken.
  // Priced once the instructions of that instant have started (PriceResumes): on a node
  // whose cores they all hold, the thread waits for a core.
  struct Resume {
    int instr;
    double waited;  // how long its thread had waited for the event
    bool woken;     // it had blocked
  };
  std::vector<Resume> resumes_;
  void PriceResumes();
  // A spinner's turn among the node's runnable threads (spin_latency).
  double CaughtSpinLatency(int rank) const;
  // Threads of the node's running ops.
  double NodeOpThreads(int node) const;
  // When the first thread running an op on `node` waits (its op and the ones its stream
  // runs on without waiting for another stream end), at most held_spin_latency.
  double HeldCoreRelease(int node) const;
  std::vector<int> stream_next_;  // the next instruction on its rank's stream, or -1
  std::vector<int> stream_prev_;  // the one before, or -1
  std::vector<double> cpu_used_;  // per instruction: the CPU its thread used in it
  std::vector<int> waits_;        // per rank: such waits, each woken by another stream or rank
  std::vector<double> rank_cpu_;  // per rank: RankResult::cpu
  std::vector<int> slot_uses_;
  std::vector<int> unfinished_in_step_;  // per rank and step (StepIndex)
  std::vector<double> issue_offset_;     // host launches before it, from its step's issue
  std::vector<std::vector<std::pair<double, int64_t>>> memory_;  // per rank: (time, delta)
  std::vector<Activity> active_;
  std::vector<Activity> to_launch_;           // waits' CPU, launched after the current sweep
  std::vector<int> comm_active_;              // per rank: running transfers and collectives
  std::optional<CoreTurns> turns_;            // DeviceSpec.cores_in_turns
  std::vector<int> ops_computing_;            // per rank: running compute instructions
  std::vector<double> node_compute_threads_;  // per node: threads running compute
  std::vector<int> node_ranks_;               // per node: its ranks
  using Timed = std::pair<double, int>;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<>> heap_;
};

void Engine::Prepare() {
  if (dev_.cores_in_turns() && dev_.cores_per_node() > 0)
    turns_.emplace(2 * g_.world_size, dev_.cores_per_node());  // see TakeTurns' threads
  pending_.assign(n_, 0);
  succ_.assign(n_, {});
  earliest_.assign(n_, 0);
  t_.assign(n_, InstrTime{});
  transfer_end_.assign(n_, -1);
  posted_.assign(n_, false);
  finished_.assign(n_, false);
  arrived_.assign(n_, false);
  waiting_.assign(n_, false);
  wait_since_.assign(n_, 0);
  woken_.assign(n_, false);
  spin_history_.assign(static_cast<size_t>(g_.world_size) * kNumStreamTypes, SpinHistory());
  waiting_on_.assign(spin_history_.size(), -1);
  waits_.assign(g_.world_size, 0);
  rank_cpu_.assign(g_.world_size, 0.0);
  joined_.assign(g_.collectives.size(), 0);
  comm_active_.assign(g_.world_size, 0);
  ops_computing_.assign(g_.world_size, 0);
  node_compute_threads_.assign(static_cast<size_t>(Node(g_.world_size - 1)) + 1, 0.0);
  node_ranks_.assign(node_compute_threads_.size(), 0);
  for (int r = 0; r < g_.world_size; ++r) ++node_ranks_[Node(r)];
  memory_.assign(g_.world_size, {});
  slot_uses_.resize(g_.slots.size());
  for (size_t s = 0; s < g_.slots.size(); ++s) slot_uses_[s] = g_.slots[s].uses;
  for (int i = 0; i < n_; ++i)
    for (int d : g_.instrs[i].deps) {
      succ_[d].push_back(i);
      ++pending_[i];
    }
  // The stream predecessor, and the host's issue time (one launch per instruction). A
  // rank's later steps (RepeatSteps) are issued once its previous step has finished: each
  // waits for that (one more pending count) and is issued from then on as the first was.
  const int steps = g_.steps;
  unfinished_in_step_.assign(static_cast<size_t>(g_.world_size) * steps, 0);
  issue_offset_.assign(n_, 0);
  stream_prev_ = StreamPredecessors(g_);
  stream_next_.assign(n_, -1);
  cpu_used_.assign(n_, 0);
  for (int r = 0; r < g_.world_size; ++r) {
    const std::vector<int>& order = g_.rank_order[r];
    const size_t per_step = order.size() / steps;
    for (size_t k = 0; k < order.size(); ++k) {
      int i = order[k];
      const SimInstr& in = g_.instrs[i];
      if (const int previous = stream_prev_[i]; previous >= 0) {
        stream_next_[previous] = i;
        succ_[previous].push_back(i);
        ++pending_[i];
      } else {
        waiting_[i] = pending_[i] > 0;  // its thread waits from the step's start
        if (waiting_[i]) waiting_on_[StreamKey(r, in.stream)] = i;
      }
      issue_offset_[i] = static_cast<double>(k % per_step + 1) * dev_.launch_overhead();
      ++unfinished_in_step_[StepIndex(r, in.step)];
      if (in.step == 0) {
        earliest_[i] = issue_offset_[i];
      } else {
        ++pending_[i];
      }
    }
  }
}

void Engine::IssueStep(int rank, int step) {
  const std::vector<int>& order = g_.rank_order[rank];
  const size_t per_step = order.size() / g_.steps;
  for (size_t k = per_step * step; k < per_step * (step + 1); ++k) {
    const int i = order[k];
    earliest_[i] = std::max(earliest_[i], now_ + issue_offset_[i]);
    if (--pending_[i] == 0) Ready(i);
  }
}

void Engine::Ready(int i) { heap_.push({earliest_[i], i}); }

void Engine::Launch(Activity a) {
  a.total = a.work;
  a.began = now_;
  if (a.compute) {
    node_compute_threads_[Node(a.ranks[0])] += a.threads;
    if (!a.finish.empty()) ++ops_computing_[a.ranks[0]];  // not a wake-up's CPU
  } else {
    for (int r : a.ranks) ++comm_active_[r];
  }
  active_.push_back(std::move(a));
}

void Engine::Start(int i) {
  const SimInstr& in = g_.instrs[i];
  t_[i].start = now_;
  for (int slot : in.allocs) memory_[in.rank].push_back({now_, g_.slots[slot].bytes});
  posted_[i] = true;
  switch (in.kind) {
    case InstrKind::kCompute: {
      t_[i].active = now_;
      Activity a;
      a.work = in.seconds + op_overhead_;
      a.compute = true;
      a.threads = in.gemm ? compute_threads_ : 1;
      a.ranks = {in.rank};
      a.finish = {i};
      Launch(std::move(a));
      break;
    }
    case InstrKind::kCollective: {
      const SimCollective& c = g_.collectives[in.collective];
      if (++joined_[in.collective] < static_cast<int>(c.members.size())) break;
      Activity a;
      for (int m : c.members) {
        t_[m].active = now_;
        a.ranks.push_back(g_.instrs[m].rank);
        a.finish.push_back(m);
      }
      // On communication streams, only where a member's thread was woken for it (see
      // ComputeRates), or where a member's rank computes beside it (ComputeRates); a compute
      // stream's collective is reached by a thread that computed.
      a.straggles = false;
      a.unpriced = true;
      for (int m : c.members) {
        const StreamType stream = g_.instrs[m].stream;
        a.straggles =
            a.straggles || woken_[m] || stream == StreamType::kCompute || !SpinsOnEvents(stream);
      }
      StartComm(a, in, c.seconds);
      Launch(std::move(a));
      break;
    }
    case InstrKind::kSend: {
      const int recv = in.partner;
      if (opt_.rendezvous_p2p && !posted_[recv]) break;  // the recv launches it
      Activity a;
      a.ranks = {in.rank, g_.instrs[recv].rank};
      StartComm(a, in, in.seconds);
      t_[i].active = now_;
      if (ChargesTransfers()) ChargeCpu(in.rank, dev_.transfer_cpu() / 2);
      if (opt_.rendezvous_p2p) {
        t_[recv].active = now_;
        a.finish = {i, recv};
      } else {
        a.recv = recv;
        Launch(std::move(a));
        // The send returns once posted; remember the transfer for the recv.
        transfer_end_[i] = kInf;
        Finish(i);
        return;
      }
      Launch(std::move(a));
      break;
    }
    case InstrKind::kRecv: {
      const int send = in.partner;
      if (opt_.rendezvous_p2p) {
        if (!posted_[send]) break;  // the send launches it
        Activity a;
        a.ranks = {g_.instrs[send].rank, in.rank};
        StartComm(a, g_.instrs[send], g_.instrs[send].seconds);
        a.finish = {send, i};
        t_[send].active = now_;
        t_[i].active = now_;
        Launch(std::move(a));
      } else if (arrived_[i]) {
        t_[i].active = now_;
        Finish(i);
      }
      break;
    }
  }
}

double Engine::TransferEnd(int i) const {
  // An eager send returns when posted, its data arriving later; a rendezvous one ends with
  // its transfer.
  return g_.instrs[i].kind == InstrKind::kSend && !opt_.rendezvous_p2p ? transfer_end_[i]
                                                                       : t_[i].end;
}

void Engine::Finish(int i) {
  const SimInstr& in = g_.instrs[i];
  finished_[i] = true;
  t_[i].end = now_;
  ++done_;
  if (in.kind == InstrKind::kRecv && ChargesTransfers())
    ChargeCpu(in.rank, dev_.transfer_cpu() / 2);
  if (--unfinished_in_step_[StepIndex(in.rank, in.step)] == 0 && in.step + 1 < g_.steps)
    IssueStep(in.rank, in.step + 1);
  for (int slot : in.uses)
    if (--slot_uses_[slot] == 0 && !g_.slots[slot].persistent)
      memory_[in.rank].push_back({now_, -g_.slots[slot].bytes});
  for (int s : succ_[i]) {
    const SimInstr& next = g_.instrs[s];
    double at = now_;
    const bool same_stream = next.stream == in.stream && next.rank == in.rank;
    if (same_stream && pending_[s] > 1) {
      waiting_[s] = true;
      wait_since_[s] = now_;
      waiting_on_[StreamKey(next.rank, next.stream)] = s;
    }
    if (!same_stream) {
      const std::optional<double> latency = HandOff(in, s);
      if (!latency) {  // priced once this instant's instructions have started
        --pending_[s];
        continue;
      }
      at += *latency;
    }
    earliest_[s] = std::max(earliest_[s], at);
    if (--pending_[s] == 0) Ready(s);
  }
}

double Engine::SpinBudget(int key) const {
  return spin_history_[key].spins_long() ? dev_.long_spin_budget() : dev_.spin_budget();
}

std::vector<Engine::NodeLoad> Engine::NodeDemand() const {
  std::vector<NodeLoad> demand(static_cast<size_t>(Node(g_.world_size - 1)) + 1);
  for (const Activity& a : active_) {
    if (a.done) continue;
    if (a.compute) {
      demand[Node(a.ranks[0])].compute += a.threads;
    } else {
      for (int r : a.ranks) demand[Node(r)].comm += a.comm_threads;
    }
  }
  return demand;
}

double Engine::ComputeRate(const NodeLoad& load) const {
  const double rate = ThreadRate(dev_, load.threads());
  if (dev_.cores_per_node() <= 0 || load.comm <= 0 || load.compute <= 0) return rate;
  // Communication keeps the CPU it measured (ComputeRates): the compute threads share what
  // the node's threads get in all less that. A share as if it competed like them had the
  // threads use more than the cores while communication streams ran beside compute: the
  // small GPT's overlap-1f1b plan on 4 processes and 2 cores came out as fast as its 1f1b
  // plan (0.94-1.0 x), where runs measure 1.15-1.27 x, both burning the cores to the full.
  return std::min(ThreadRate(dev_, load.compute), ComputeCores(load) / load.compute);
}

double Engine::ComputeCores(const NodeLoad& load) const {
  return std::max(0.0, ThreadRate(dev_, load.threads()) * load.threads() - load.comm);
}

int Engine::SpinningThreads(int rank) const {
  int spinning = 0;
  // The node's ranks, one after another (Node).
  const int per_node = dev_.ranks_per_node() > 0 ? dev_.ranks_per_node() : g_.world_size;
  const int first = Node(rank) * per_node;
  for (int r = first; r < std::min(g_.world_size, first + per_node); ++r) {
    for (StreamType stream : kAllStreamTypes) {
      const int key = StreamKey(r, stream);
      const int i = waiting_on_[key];
      if (i >= 0 && t_[i].start < 0 && SpinsOnEvents(stream) &&
          now_ - wait_since_[i] <= SpinBudget(key))
        ++spinning;
    }
  }
  return spinning;
}

std::optional<double> Engine::HandOff(const SimInstr& from, int to) {
  const SimInstr& next = g_.instrs[to];
  // Its thread waits for this event (and nothing else): the instruction starts when the
  // waiter sees it.
  const bool releases = pending_[to] == 1 && waiting_[to];
  if (next.rank == from.rank && SpinsOnEvents(next.stream)) {
    if (!releases) return 0;  // recorded before its thread looks: no wait at all
    const double waited = now_ - wait_since_[to];
    const int key = StreamKey(next.rank, next.stream);
    // Caught spinning, or blocked and woken. When its thread runs depends on what the
    // node's threads run once this instant's instructions have started.
    const bool woken = waited > SpinBudget(key);
    if (woken) {
      Wake(next.rank, WakeCpu(next));
      woken_[to] = true;
    } else {
      ChargeCpu(next.rank, dev_.spin_cpu_share() * std::min(waited, SpinBudget(key)));
    }
    resumes_.push_back({to, waited, woken});
    return std::nullopt;
  }
  if (releases) Wake(next.rank, WakeCpu(next));
  // Waking another rank's thread on a node whose cores all compute waits for a core; a
  // stream of the same rank takes the core the finishing stream's thread releases.
  double latency = dev_.event_latency();
  if (next.rank != from.rank && NodeBusy(next.rank)) latency += dev_.busy_wake_latency();
  return latency;
}

double Engine::CaughtSpinLatency(int rank) const {
  const double runnable = NodeDemand()[Node(rank)].threads() + SpinningThreads(rank);
  return dev_.spin_latency() * std::max(1.0, runnable / dev_.cores_per_node());
}

double Engine::NodeOpThreads(int node) const {
  double threads = 0;
  for (const Activity& a : active_)
    if (a.compute && !a.done && !a.finish.empty() && Node(a.ranks[0]) == node) threads += a.threads;
  return threads;
}

double Engine::HeldCoreRelease(int node) const {
  const double cap = dev_.held_spin_latency();
  double first = cap;
  for (const Activity& a : active_) {
    if (!a.compute || a.done || a.finish.empty() || Node(a.ranks[0]) != node) continue;
    // Its op's rest, then the ops its stream runs on without waiting for another stream.
    double release = a.work / a.rate;
    for (int j = stream_next_[a.finish[0]]; j >= 0 && release < first; j = stream_next_[j]) {
      const SimInstr& in = g_.instrs[j];
      if (pending_[j] != 1 || in.kind != InstrKind::kCompute) break;
      release += in.seconds + op_overhead_;
    }
    first = std::min(first, release);
  }
  return first;
}

void Engine::PriceResumes() {
  // Every spinner still counts among the runnable threads while the others are priced.
  std::vector<double> latency;
  for (const Resume& r : resumes_) {
    const SimInstr& next = g_.instrs[r.instr];
    const int key = StreamKey(next.rank, next.stream);
    double seconds = r.woken ? dev_.event_latency() : CaughtSpinLatency(next.rank);
    const int node = Node(next.rank);
    // Where the node's cores are taken in turns, an op the thread resumes to queues for its
    // core there (TakeTurns): a held-core wait as well would count that wait twice.
    const bool queues_in_turns = turns_ && next.kind == InstrKind::kCompute;
    if (dev_.held_spin_latency() > 0 && !queues_in_turns &&
        NodeOpThreads(node) >= dev_.cores_per_node()) {
      // The CPU its thread used since it last slept: its last instruction and the spin.
      const int last = stream_prev_[r.instr];
      const double ran = (last >= 0 ? cpu_used_[last] : 0) + std::min(r.waited, SpinBudget(key));
      seconds = std::max(seconds, std::min(HeldCoreRelease(node), dev_.held_wake_factor() * ran));
    }
    latency.push_back(seconds);
  }
  for (size_t k = 0; k < resumes_.size(); ++k) {
    const Resume& r = resumes_[k];
    const SimInstr& next = g_.instrs[r.instr];
    const int key = StreamKey(next.rank, next.stream);
    spin_history_[key].Observe(r.waited + latency[k] <= dev_.long_spin_budget());
    waiting_on_[key] = -1;
    earliest_[r.instr] = std::max(earliest_[r.instr], now_ + latency[k]);
    if (pending_[r.instr] == 0) Ready(r.instr);
  }
  resumes_.clear();
}

void Engine::Wake(int rank, double cpu) {
  ++waits_[rank];
  ChargeCpu(rank, cpu);
}

void Engine::ChargeCpu(int rank, double seconds) {
  // Launched after the sweep that finished the event.
  if (seconds <= 0 || dev_.cores_per_node() <= 0) return;
  Activity a;
  a.work = seconds;
  a.compute = true;
  a.ranks = {rank};
  to_launch_.push_back(std::move(a));
}

void Engine::CompleteActivity(Activity& a) {
  a.done = true;
  if (a.compute) {
    node_compute_threads_[Node(a.ranks[0])] -= a.threads;
    if (!a.finish.empty()) --ops_computing_[a.ranks[0]];
  } else {
    for (int r : a.ranks) --comm_active_[r];
  }
  if (a.recv >= 0) {  // an eager transfer arrived
    int send = g_.instrs[a.recv].partner;
    transfer_end_[send] = now_;
    t_[send].end = now_;
    arrived_[a.recv] = true;
    if (posted_[a.recv] && !finished_[a.recv]) {
      t_[a.recv].active = std::max(t_[a.recv].start, a.began);
      Finish(a.recv);
    }
  }
  for (int i : a.finish) cpu_used_[i] = a.cpu;
  for (int i : a.finish) Finish(i);
}

int Engine::BusyCores(const std::vector<int>& ranks) const {
  int busy = 0;
  if (dev_.cores_per_node() > 0)
    for (int r : ranks)
      busy =
          std::max(busy, std::min(dev_.cores_per_node(), static_cast<int>(NodeComputeDemand(r))));
  return busy;
}

CommEstimate Engine::CommPrice(const SimInstr& in, double fallback, const std::vector<int>& ranks,
                               double bytes) const {
  if (!comm_ || in.group_size < 2) return {bytes == 0 ? 0 : fallback, false, 0};
  CommKind kind = in.kind == InstrKind::kCollective ? in.comm_kind : CommKind::kSendRecv;
  return comm_->Time(kind, bytes < 0 ? in.bytes : bytes, in.group_size, in.span, BusyCores(ranks));
}

void Engine::ComputeRates() {
  // Communication is priced first (under the compute load it meets): what it measured with
  // its CPU time is also what it keeps of the cores.
  for (Activity& a : active_) {
    if (a.compute) continue;
    // A member's rank that computes beside the collective on shared cores (an overlap
    // pass's plan): the member's thread competes with that compute, and the ranks reach it
    // apart. Judged once, when every instruction that starts with it has started.
    if (a.unpriced) {
      a.unpriced = false;
      if (dev_.cores_per_node() > 0)
        for (int r : a.ranks) a.straggles = a.straggles || ops_computing_[r] > 0;
    }
    CommEstimate price = CommPrice(*a.comm, a.seconds, a.ranks);
    // Ranks on shared cores arrive apart: the collective waits for the last one, whose
    // thread had to be woken for it (not where every member's thread caught its event
    // spinning or found it recorded: they were running).
    if (a.comm->kind == InstrKind::kCollective && TakesTurns(*a.comm))
      price.seconds += dev_.turn_straggle() * price.straggle;  // the turns' share beyond sharing
    else if (a.comm->kind == InstrKind::kCollective && a.straggles)
      price.seconds +=
          a.comm->stream == StreamType::kCompute ? price.straggle : price.comm_stream_straggle;
    a.rate = price.seconds > 0 ? 1.0 / price.seconds : 1e30;
    a.latency = std::min(price.seconds, CommPrice(*a.comm, a.seconds, a.ranks, 0).seconds);
    a.comm_threads = price.cpu > 0 && price.seconds > 0 ? std::min(1.0, price.cpu / price.seconds)
                                                        : dev_.comm_threads();
    // A pipeline transfer's CPU is charged where its threads run (ChargesTransfers).
    if (a.comm->kind != InstrKind::kCollective && ChargesTransfers()) a.comm_threads = 0;
  }
  ShareLinks();
  const std::vector<NodeLoad> demand = NodeDemand();
  if (turns_) {
    TakeTurns(demand);
    return;
  }
  auto share = [&](int rank) { return ComputeRate(demand[Node(rank)]); };
  for (Activity& a : active_) {
    if (!a.compute) continue;
    int r = a.ranks[0];
    a.core_share = share(r);
    a.rate = a.core_share / (1 + (comm_active_[r] > 0 ? dev_.overlap_slowdown() : 0));
  }
}

void Engine::TakeTurns(const std::vector<NodeLoad>& demand) {
  // The cores communication leaves (it keeps the CPU it measured, as with even sharing),
  // and the speed of a thread that holds one (a shared machine's measured thread_rate).
  std::vector<double> free(demand.size());
  std::vector<double> speed(demand.size());
  for (size_t n = 0; n < demand.size(); ++n) {
    free[n] = ComputeCores(demand[n]);
    speed[n] = ThreadRate(dev_, std::min<double>(demand[n].threads(), dev_.cores_per_node()));
  }
  std::vector<CoreTurns::Claim> claims;
  std::vector<Activity*> claimed;
  for (Activity& a : active_) {
    if (!a.compute || a.done) continue;
    // A rank's ops take turns on its compute thread; the CPU charged to its other threads
    // (ChargeCpu: wake-ups, transfers) on another, which holds no turn of the ops'.
    const int thread = a.finish.empty() ? g_.world_size + a.ranks[0] : a.ranks[0];
    claims.push_back({thread, Node(a.ranks[0]), a.threads, a.began, a.finish.empty()});
    claimed.push_back(&a);
  }
  const std::vector<double> granted = turns_->Grant(now_, free, claims);
  for (size_t i = 0; i < claimed.size(); ++i) {
    Activity& a = *claimed[i];
    const int r = a.ranks[0];
    // An op that waited for a core began its work when it got one.
    if (granted[i] > 0 && !a.got_core && !a.finish.empty()) t_[a.finish[0]].active = now_;
    a.got_core = a.got_core || granted[i] > 0;
    a.core_share = granted[i] / a.threads;
    a.rate =
        a.core_share * speed[Node(r)] / (1 + (comm_active_[r] > 0 ? dev_.overlap_slowdown() : 0));
  }
}

// Communication that runs at once on one rank shares its links: collectives a rank
// takes part in share them with each other (two all-reduces on mp_comm and mp_fwd_comm
// each get half the bandwidth), a rank's outgoing transfers share its sending side and its
// incoming ones its receiving side (links carry both directions at once). Only the
// bandwidth part of a time is shared (its fixed cost, the model's time for no bytes, is
// not: latency-bound messages overlap freely); each runs at the rate of its most shared
// member.
void Engine::ShareLinks() {
  std::vector<int> collectives(g_.world_size, 0), out(g_.world_size, 0), in(g_.world_size, 0);
  auto sender = [](const Activity& a) { return a.ranks.front(); };
  auto receiver = [](const Activity& a) { return a.ranks.back(); };
  for (const Activity& a : active_) {
    if (a.compute) continue;
    if (a.comm->kind == InstrKind::kCollective) {
      for (int r : a.ranks) ++collectives[r];
    } else {
      ++out[sender(a)];
      ++in[receiver(a)];
    }
  }
  for (Activity& a : active_) {
    if (a.compute) continue;
    int shared = 1;
    if (a.comm->kind == InstrKind::kCollective) {
      for (int r : a.ranks) shared = std::max(shared, collectives[r]);
    } else {
      shared = std::max({shared, out[sender(a)], in[receiver(a)]});
    }
    if (shared == 1) continue;
    const double seconds = 1.0 / a.rate;
    a.rate = 1.0 / (a.latency + (seconds - a.latency) * shared);
  }
}

Status Engine::Deadlock() const {
  std::string blocked;
  int shown = 0;
  for (int r = 0; r < g_.world_size && shown < 4; ++r) {
    std::array<bool, kNumStreamTypes> seen{};
    for (int i : g_.rank_order[r]) {
      const SimInstr& in = g_.instrs[i];
      int s = static_cast<int>(in.stream);
      if (finished_[i] || seen[s]) continue;
      seen[s] = true;
      if (shown++ >= 4) break;
      std::string job = in.job >= 0 ? g_.job_names[r][in.job] : "step";
      const char* why = in.kind == InstrKind::kRecv         ? "its send never starts"
                        : in.kind == InstrKind::kCollective ? "the rest of its group"
                        : in.kind == InstrKind::kSend       ? "its recv"
                                                            : "its inputs";
      blocked += StrCat(blocked.empty() ? "" : "; ", "rank ", r, " ", StreamTypeName(in.stream),
                        " at ", in.name, " of ", job, " (waits for ", why, ")");
    }
  }
  return FailedPrecondition("the plan deadlocks after ", done_, " of ", n_,
                            " instructions: ", blocked);
}

Status Engine::Report(SimResult& out) const {
  out.ranks.assign(g_.world_size, RankResult{});
  out.step_ends.assign(g_.steps, 0.0);
  std::vector<IntervalSet> compute(g_.world_size), comm(g_.world_size);
  std::vector<std::array<IntervalSet, kNumCommClasses>> by_class(g_.world_size);
  for (int i = 0; i < n_; ++i) {
    const SimInstr& in = g_.instrs[i];
    RankResult& rr = out.ranks[in.rank];
    double active = t_[i].active >= 0 ? t_[i].active : t_[i].start;
    double end = TransferEnd(i);
    if (in.kind == InstrKind::kSend && !opt_.rendezvous_p2p) active = t_[i].start;
    rr.busy[static_cast<int>(in.stream)] += end - active;
    rr.end = std::max(rr.end, t_[i].end);
    out.step_time = std::max(out.step_time, t_[i].end);
    out.step_ends[in.step] = std::max(out.step_ends[in.step], t_[i].end);
    if (!g_.folded()) out.path_seconds[static_cast<int>(in.path)] += in.seconds;
    if (in.kind == InstrKind::kCompute) {
      compute[in.rank].Add(active, end);
    } else {
      comm[in.rank].Add(active, end);
      by_class[in.rank][static_cast<int>(in.comm_class)].Add(active, end);
      if (in.kind == InstrKind::kSend) comm[g_.instrs[in.partner].rank].Add(active, end);
    }
  }
  // A folded graph's replicas ran as their stand-ins did, every instruction alike (the
  // same sums, in the same order, as over the whole graph).
  if (g_.folded())
    for (int r = 0; r < g_.world_size; ++r)
      for (int i : g_.rank_order[g_.replica_of[r]])
        out.path_seconds[static_cast<int>(g_.instrs[i].path)] += g_.instrs[i].seconds;
  double idle = 0;
  for (int r = 0; r < g_.world_size; ++r) {
    RankResult& rr = out.ranks[r];
    if (g_.simulated_rank(r) != r) {
      rr = out.ranks[g_.replica_of[r]];
      rr.rank = r;
      idle += rr.bubble;
      out.stream_waits += rr.stream_waits;
      out.cpu += rr.cpu;
      continue;
    }
    rr.rank = r;
    rr.stream_waits = waits_[r];
    rr.cpu = rank_cpu_[r];
    rr.compute_busy = compute[r].Length();
    rr.comm_busy = comm[r].Length();
    rr.exposed_comm = rr.comm_busy - comm[r].OverlapWith(compute[r]);
    rr.bubble = out.step_time - rr.compute_busy;
    idle += rr.bubble;
    out.stream_waits += rr.stream_waits;
    out.cpu += rr.cpu;
    out.exposed_comm = std::max(out.exposed_comm, rr.exposed_comm);
    for (int c = 1; c < kNumCommClasses; ++c) {
      const IntervalSet& set = by_class[r][c];
      rr.exposed_by_class[c] = set.Length() - set.OverlapWith(compute[r]);
      out.exposed_by_class[c] = std::max(out.exposed_by_class[c], rr.exposed_by_class[c]);
    }
    for (int s = 0; s < kNumStreamTypes; ++s)
      out.busy_by_stream[s] = std::max(out.busy_by_stream[s], rr.busy[s]);
  }
  for (const SimSlot& s : g_.slots)
    if (s.persistent) out.ranks[s.rank].persistent_bytes += s.bytes;
  for (int r = 0; r < g_.world_size; ++r) {
    const int stand_in = g_.simulated_rank(r);
    if (stand_in != r) {
      out.ranks[r].persistent_bytes = out.ranks[stand_in].persistent_bytes;
      out.ranks[r].peak_bytes = out.ranks[stand_in].peak_bytes;
      continue;
    }
    std::vector<std::pair<double, int64_t>> events = memory_[r];
    // Frees before allocations at the same instant.
    std::sort(events.begin(), events.end());
    // Wider than int64: a module may declare 2^52 bytes, and 65536 micro-batches of
    // activations can be live at once.
    __int128 live = out.ranks[r].persistent_bytes, peak = live;
    for (const auto& [time, delta] : events) {
      live += delta;
      peak = std::max(peak, live);
    }
    if (peak > std::numeric_limits<int64_t>::max())
      return InvalidArgument("rank ", r, " would hold more than 2^63 bytes at once");
    out.ranks[r].peak_bytes = static_cast<int64_t>(peak);
  }
  // Each cost is finite, but huge ones (a table entry of 1e308 s) sum, or print in ms, as
  // infinity. Far beyond any real step (a 96 TiB parameter on a CPU takes ~1e9 s).
  constexpr double kMaxStepSeconds = 1e15;
  if (!(out.step_time <= kMaxStepSeconds))
    return InvalidArgument("the simulated step takes ", out.step_time, " s, more than ",
                           kMaxStepSeconds, " s: an op time, a cost table entry or a device ",
                           "figure is out of scale");
  out.bubble_rate = out.step_time > 0 ? idle / (g_.world_size * out.step_time) : 0;
  if (opt_.record_timeline) {
    out.timeline = t_;
    for (int i = 0; i < n_; ++i) out.timeline[i].end = TransferEnd(i);
  }
  return OkStatus();
}

bool Engine::StartReadyInstructions() {
  bool started = false;
  while (!heap_.empty() && heap_.top().first <= now_) {
    int i = heap_.top().second;
    heap_.pop();
    Start(i);
    started = true;
  }
  return started;
}

bool Engine::CompleteFinishedActivities() {
  // In launch order: the wake-up of a successor on busy cores (NodeBusy) counts the
  // activities this sweep has not reached yet as running. The finished ones leave the
  // vector together afterwards (erasing each from the middle costs O(n) apiece).
  bool completed = false;
  for (Activity& a : active_) {
    if (a.work > 1e-12 * (1 + a.total)) continue;
    CompleteActivity(a);
    completed = true;
  }
  if (completed)
    active_.erase(
        std::remove_if(active_.begin(), active_.end(), [](const Activity& a) { return a.done; }),
        active_.end());
  for (Activity& a : to_launch_) Launch(std::move(a));
  to_launch_.clear();
  return completed;
}

Status Engine::AdvanceToNextEvent() {
  ComputeRates();
  double next = heap_.empty() ? kInf : heap_.top().first;
  if (turns_) next = std::min(next, turns_->NextTurnEnd());
  for (Activity& a : active_) {
    a.ends = now_ + a.work / a.rate;
    next = std::min(next, a.ends);
  }
  if (!std::isfinite(next))
    return Internal("the simulation stopped at ", now_, " s: no running work can progress");
  const double dt = next - now_;
  for (Activity& a : active_) {
    a.cpu += (a.compute ? std::min(1.0, a.rate) : a.comm_threads) * dt;
    a.work = a.ends <= next ? 0.0 : std::max(0.0, a.work - a.rate * dt);
    if (!CountsCpu()) continue;
    if (a.compute) {
      rank_cpu_[a.ranks[0]] += a.core_share * dt;
    } else {
      for (int r : a.ranks) rank_cpu_[r] += a.comm_threads * dt;
    }
  }
  now_ = next;
  return OkStatus();
}

StatusOr<SimResult> Engine::Run() {
  Prepare();
  for (int i = 0; i < n_; ++i)
    if (pending_[i] == 0) Ready(i);
  while (done_ < n_) {
    const bool started = StartReadyInstructions();
    if (CompleteFinishedActivities() || started) continue;
    if (!resumes_.empty()) {
      PriceResumes();
      continue;
    }
    if (active_.empty() && heap_.empty()) return Deadlock();
    PW_RETURN_IF_ERROR(AdvanceToNextEvent());
  }
  SimResult out;
  PW_RETURN_IF_ERROR(Report(out));
  return out;
}

}  // namespace

StatusOr<SimResult> Simulate(const SimGraph& graph, const DeviceSpec& device,
                             const SimOptions& options, const CommModel* comm) {
  for (const SimInstr& in : graph.instrs)
    if (!std::isfinite(in.seconds) || in.seconds < 0)
      return InvalidArgument("instruction '", in.name, "' on rank ", in.rank,
                             " has an invalid cost ", in.seconds);
  std::vector<double> persistent(static_cast<size_t>(std::max(graph.world_size, 0)), 0.0);
  for (const SimSlot& s : graph.slots)
    if (s.persistent && s.rank >= 0 && s.rank < graph.world_size)
      persistent[s.rank] += static_cast<double>(s.bytes);
  PW_RETURN_IF_ERROR(CheckRepresentableMemory(persistent, device));
  Engine engine(graph, device, options, comm);
  return engine.Run();
}

SimOptions Simulator::Resolved() const {
  SimOptions options = options_;
  if (options.compute_threads <= 0)
    options.compute_threads = std::max(1, estimator_->table().proto().blas_threads());
  return options;
}

SimGraphOptions Simulator::GraphOptions(bool fold_replicas) const {
  SimGraphOptions graph;
  graph.fold_replicas = fold_replicas;
  graph.fuse_grad_accumulation = options_.fuse_grad_accumulation;
  return graph;
}

StatusOr<SimResult> Simulator::Run(const Module& module) const { return Run(module, nullptr); }

StatusOr<SimResult> Simulator::Run(const Module& module, SimGraph* graph_out) const {
  // Replicas fold only where nothing asks for every rank's timeline.
  PW_ASSIGN_OR_RETURN(SimGraph graph, BuildSimGraph(module, *estimator_, registry_,
                                                    GraphOptions(!options_.record_timeline)));
  const SimOptions options = Resolved();
  PW_ASSIGN_OR_RETURN(SimResult result,
                      Simulate(graph, estimator_->device(), options, &estimator_->comm()));
  if (options.steps > 1) {
    PW_ASSIGN_OR_RETURN(SimResult steps, RunSteady(module));
    result.steady_step_time = steps.steady_step_time;
    result.steady_steps = steps.steady_steps;
    result.steady_cpu = steps.CpuPerStep();
  }
  if (graph_out) *graph_out = std::move(graph);
  return result;
}

StatusOr<SimResult> Simulator::RunSteady(const Module& module) const {
  if (options_.steps < 2)
    return InvalidArgument("a steady step needs at least 2 steps, got ", options_.steps);
  // The steps back to back need no timeline: their figure is when each ended.
  PW_ASSIGN_OR_RETURN(SimGraph folded,
                      BuildSimGraph(module, *estimator_, registry_, GraphOptions(true)));
  PW_ASSIGN_OR_RETURN(SimGraph repeated, RepeatSteps(folded, options_.steps));
  SimOptions options = Resolved();
  options.record_timeline = false;
  PW_ASSIGN_OR_RETURN(SimResult steps,
                      Simulate(repeated, estimator_->device(), options, &estimator_->comm()));
  steps.steady_step_time = (steps.step_ends.back() - steps.step_ends.front()) / (options.steps - 1);
  steps.steady_steps = options.steps;
  steps.step_time = steps.step_ends.front();
  return steps;
}

}  // namespace pw::cost
