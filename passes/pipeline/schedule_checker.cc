#include "passes/pipeline/schedule_checker.h"

#include <algorithm>
#include <functional>

#include "ir/action_edges.h"
#include "ir/parallel.h"

namespace pw::pipeline {

namespace {

enum StageBits : uint8_t { kF = 1, kB = 2, kI = 4, kW = 8 };
enum EdgeBits : uint8_t { kSendF = 1, kRecvF = 2, kSendB = 4, kRecvB = 8 };

class StructureCheck {
 public:
  explicit StructureCheck(const ActionSchedule& s)
      : s_(s),
        edges_(s),
        S_(s.num_stages),
        M_(s.num_micro_batches),
        comm_(s.HasComms()),
        skips_(!s.skip_edges.empty()) {}

  Status Run() {
    PW_RETURN_IF_ERROR(CheckScheduleShape(s_));
    stage_.assign(static_cast<size_t>(S_) * M_, 0);
    edge_.assign(static_cast<size_t>(edges_.num_edges()) * M_, 0);
    for (int r = 0; r < s_.num_ranks(); ++r) {
      const auto& actions = s_.ranks[r];
      // FastRun vouches for the common actions; the others get the full rules.
      for (size_t i = FastRun(r, 0); i < actions.size(); i = FastRun(r, i + 1)) {
        const Action& a = actions[i];
        if (a.type == ActionType::kIdle) continue;
        if (IsFused(a.type) &&
            (a.micro_batch < 0 || static_cast<size_t>(a.micro_batch) + 1 >= s_.group_begin.size()))
          return InvalidArgument("rank ", r, ", action ", i, ": fused action without parts");
        for (const Action& p : s_.Parts(a)) {
          Status st = CheckPart(r, p);
          if (!st.ok())
            return Status(st.code(), StrCat("rank ", r, ", action ", i, " (", ActionToString(a, s_),
                                            "): ", st.message()));
        }
      }
    }
    return CheckComplete();
  }

 private:
  uint8_t& StageAt(int s, int m) { return stage_[static_cast<size_t>(s) * M_ + m]; }
  uint8_t& EdgeAt(int e, int m) { return edge_[static_cast<size_t>(e) * M_ + m]; }
  int RankOf(int s) const { return s_.stage_to_rank[s]; }
  bool Crosses(int e) const { return RankOf(edges_.edge(e).src) != RankOf(edges_.edge(e).dst); }
  std::string Name(ActionType t, int stage, int mb, int peer = -1) const {
    return ActionToString(MakeAction(t, stage, mb, peer), s_);
  }
  // The send/recv of edge e for micro-batch m, on the side that runs `t`.
  std::string CommName(ActionType t, int e, int m) const {
    const StageEdge& edge = edges_.edge(e);
    bool adjacent = edge.dst == edge.src + 1;
    bool at_src = t == ActionType::kSendF || t == ActionType::kRecvB;
    int stage = at_src ? edge.src : edge.dst, peer = at_src ? edge.dst : edge.src;
    return Name(t, stage, m, adjacent ? -1 : peer);
  }

  // The common case without building a Status: from action `i` of rank r on, idle actions
  // and valid single actions of a chain-only schedule. Applies their bits and returns the
  // index of the first action it cannot vouch for (its bits unchanged), for CheckPart to
  // name the error or accept it. Works on locals: the bit tables are bytes, and a byte
  // store may alias anything, so members would be read again after every store.
  size_t FastRun(int r, size_t i) {
    if (skips_) return i;
    const Action* actions = s_.ranks[r].data();
    const size_t n = s_.ranks[r].size();
    const int* rank_of = s_.stage_to_rank.data();
    uint8_t* const stage = stage_.data();
    uint8_t* const edge = edge_.data();
    const int S = S_, M = M_;
    const bool comm = comm_;
    for (; i < n; ++i) {
      const Action& p = actions[i];
      if (p.type == ActionType::kIdle) continue;
      const int s = p.stage, m = p.micro_batch;
      if (s < 0 || s >= S || m < 0 || m >= M || rank_of[s] != r) return i;
      uint8_t& bits = stage[static_cast<size_t>(s) * M + m];
      int e;
      uint8_t need, bit;
      switch (p.type) {
        case ActionType::kForward:
          if (bits & kF) return i;
          if (comm && s > 0 && rank_of[s - 1] != r &&
              !(edge[static_cast<size_t>(s - 1) * M + m] & kRecvF))
            return i;
          bits |= kF;
          continue;
        case ActionType::kBackward:
        case ActionType::kBackwardInput:
          if ((bits & (kB | kI)) || !(bits & kF)) return i;
          if (comm && s + 1 < S && rank_of[s + 1] != r &&
              !(edge[static_cast<size_t>(s) * M + m] & kRecvB))
            return i;
          bits |= p.type == ActionType::kBackward ? kB : kI;
          continue;
        case ActionType::kBackwardWeight:
          if ((bits & (kW | kB)) || !(bits & kI)) return i;
          bits |= kW;
          continue;
        // A send or recv on edge e sets `bit`; a send needs its producer (`need`) first.
        case ActionType::kSendF:
          e = s, need = kF, bit = kSendF;
          break;
        case ActionType::kRecvF:
          e = s - 1, need = 0, bit = kRecvF;
          break;
        case ActionType::kSendB:
          e = s - 1, need = kB | kI, bit = kSendB;
          break;
        case ActionType::kRecvB:
          e = s, need = 0, bit = kRecvB;
          break;
        default:
          return i;
      }
      if (p.peer >= 0 || e < 0 || e >= S - 1 || rank_of[e] == rank_of[e + 1]) return i;
      if (need && !(bits & need)) return i;
      uint8_t& edge_bits = edge[static_cast<size_t>(e) * M + m];
      if (edge_bits & bit) return i;
      edge_bits |= bit;
    }
    return n;
  }

  Status CheckPart(int r, const Action& p) {
    const int s = p.stage, m = p.micro_batch;
    if (s < 0 || s >= S_) return InvalidArgument("stage ", s, " out of range [0, ", S_, ")");
    if (m < 0 || m >= M_) return InvalidArgument("micro-batch ", m, " out of range [0, ", M_, ")");
    if (RankOf(s) != r)
      return InvalidArgument("inconsistent ranks: stage ", s, " is placed on rank ", RankOf(s));
    if (IsComm(p.type)) return CheckComm(r, p);
    uint8_t& bits = StageAt(s, m);
    switch (p.type) {
      case ActionType::kForward:
        if (bits & kF) return InvalidArgument("second forward of stage ", s, " micro-batch ", m);
        if (comm_)
          for (int e : edges_.InEdges(s))
            if (Crosses(e) && !(EdgeAt(e, m) & kRecvF))
              return InvalidArgument("runs before receiving its input (no ",
                                     CommName(ActionType::kRecvF, e, m), " before it)");
        bits |= kF;
        return OkStatus();
      case ActionType::kBackward:
      case ActionType::kBackwardInput: {
        const char* what = p.type == ActionType::kBackward ? "B" : "I";
        if (bits & (kB | kI))
          return InvalidArgument("second backward of stage ", s, " micro-batch ", m);
        if (!(bits & kF))
          return InvalidArgument(what, " before the forward ", Name(ActionType::kForward, s, m));
        if (comm_)
          for (int e : edges_.OutEdges(s))
            if (Crosses(e) && !(EdgeAt(e, m) & kRecvB))
              return InvalidArgument("runs before receiving its output gradient (no ",
                                     CommName(ActionType::kRecvB, e, m), " before it)");
        bits |= p.type == ActionType::kBackward ? kB : kI;
        return OkStatus();
      }
      case ActionType::kBackwardWeight:
        if (bits & kW) return InvalidArgument("second W of stage ", s, " micro-batch ", m);
        if (bits & kB)
          return InvalidArgument("W after a full backward B (which already computed it)");
        if (!(bits & kI))
          return InvalidArgument("W before its input-gradient step ",
                                 Name(ActionType::kBackwardInput, s, m));
        bits |= kW;
        return OkStatus();
      default:
        return InvalidArgument("unexpected action");
    }
  }

  Status CheckComm(int r, const Action& p) {
    const int e = edges_.OfComm(p), m = p.micro_batch;
    if (e < 0) return InvalidArgument("names no data edge between stages");
    if (!Crosses(e))
      return InvalidArgument("stages ", edges_.edge(e).src, " and ", edges_.edge(e).dst,
                             " are both on rank ", r, "; they hand over without send/recv");
    uint8_t bit = p.type == ActionType::kSendF   ? kSendF
                  : p.type == ActionType::kRecvF ? kRecvF
                  : p.type == ActionType::kSendB ? kSendB
                                                 : kRecvB;
    uint8_t& bits = EdgeAt(e, m);
    if (bits & bit) return InvalidArgument("appears twice");
    if (p.type == ActionType::kSendF && !(StageAt(p.stage, m) & kF))
      return InvalidArgument("sends before its forward ", Name(ActionType::kForward, p.stage, m));
    if (p.type == ActionType::kSendB && !(StageAt(p.stage, m) & (kB | kI)))
      return InvalidArgument("sends before its backward ", Name(ActionType::kBackward, p.stage, m));
    bits |= bit;
    return OkStatus();
  }

  // Whether every (stage, micro-batch) and transfer is complete, the common case, by a
  // quick scan of the bit tables. CheckComplete walks them in order to name the first gap.
  bool AllComplete() const {
    bool ok = true;
    for (uint8_t bits : stage_) ok &= (bits == (kF | kB)) | (bits == (kF | kI | kW));
    if (!comm_) return ok;
    for (int e = 0; e < edges_.num_edges(); ++e) {
      if (!Crosses(e)) continue;
      const uint8_t* bits = &edge_[static_cast<size_t>(e) * M_];
      // A send without its recv or the reverse: bits kSendF and kRecvF (or kSendB and
      // kRecvB) differ.
      uint8_t unpaired = 0;
      for (int m = 0; m < M_; ++m) unpaired |= (bits[m] ^ (bits[m] >> 1)) & (kSendF | kSendB);
      ok &= unpaired == 0;
    }
    return ok;
  }

  Status CheckComplete() {
    if (AllComplete()) return OkStatus();
    for (int s = 0; s < S_; ++s)
      for (int m = 0; m < M_; ++m) {
        uint8_t bits = StageAt(s, m);
        if (!(bits & kF))
          return InvalidArgument("incomplete: rank ", RankOf(s), " never runs ",
                                 Name(ActionType::kForward, s, m));
        if (!(bits & (kB | kI)))
          return InvalidArgument("incomplete: rank ", RankOf(s), " never runs a backward (",
                                 Name(ActionType::kBackward, s, m), ", or ",
                                 Name(ActionType::kBackwardInput, s, m), " and ",
                                 Name(ActionType::kBackwardWeight, s, m), ")");
        if ((bits & kI) && !(bits & kW))
          return InvalidArgument("incomplete: rank ", RankOf(s), " runs ",
                                 Name(ActionType::kBackwardInput, s, m), " but never ",
                                 Name(ActionType::kBackwardWeight, s, m));
      }
    if (!comm_) return OkStatus();
    for (int e = 0; e < edges_.num_edges(); ++e) {
      if (!Crosses(e)) continue;
      const StageEdge& edge = edges_.edge(e);
      for (int m = 0; m < M_; ++m) {
        uint8_t bits = EdgeAt(e, m);
        PW_RETURN_IF_ERROR(Pair(bits, kSendF, kRecvF, ActionType::kSendF, ActionType::kRecvF,
                                edge.src, edge.dst, e, m));
        PW_RETURN_IF_ERROR(Pair(bits, kSendB, kRecvB, ActionType::kSendB, ActionType::kRecvB,
                                edge.dst, edge.src, e, m));
      }
    }
    return OkStatus();
  }

  Status Pair(uint8_t bits, uint8_t send_bit, uint8_t recv_bit, ActionType send, ActionType recv,
              int send_stage, int recv_stage, int e, int m) const {
    if ((bits & send_bit) && !(bits & recv_bit))
      return InvalidArgument("incomplete: ", CommName(send, e, m), " on rank ", RankOf(send_stage),
                             " has no matching ", CommName(recv, e, m), " on rank ",
                             RankOf(recv_stage));
    if (!(bits & send_bit) && (bits & recv_bit))
      return InvalidArgument("incomplete: ", CommName(recv, e, m), " on rank ", RankOf(recv_stage),
                             " has no matching ", CommName(send, e, m), " on rank ",
                             RankOf(send_stage));
    return OkStatus();
  }

  const ActionSchedule& s_;
  EdgeIndex edges_;
  const int S_, M_;
  const bool comm_, skips_;
  std::vector<uint8_t> stage_, edge_;
};

}  // namespace

Status CheckStructure(const ActionSchedule& schedule) { return StructureCheck(schedule).Run(); }

namespace {

Status CheckMemory(const ActionSchedule& schedule, const CheckOptions& options) {
  if (options.mem_limit > 0) {
    std::vector<double> peaks = PeakActivations(schedule, options.w_mem);
    for (size_t r = 0; r < peaks.size(); ++r)
      if (peaks[r] > options.mem_limit + 1e-9)
        return FailedPrecondition("rank ", r, " holds up to ", peaks[r],
                                  " M_B of activations, over the memory limit ", options.mem_limit);
  }
  return OkStatus();
}

// Runs `replay` beside the structure and memory rules (the replay is safe on an unchecked
// schedule). A broken rule wins over what the replay found, since the replay assumed them.
Status WithStructure(const ActionSchedule& schedule, const CheckOptions& options,
                     const std::function<Status()>& replay) {
  Status structure, replayed;
  RunConcurrently(
      schedule.num_actions(), [&] { replayed = replay(); },
      [&] {
        structure = CheckStructure(schedule);
        if (structure.ok()) structure = CheckMemory(schedule, options);
      });
  return structure.ok() ? replayed : structure;
}

}  // namespace

Status CheckSchedule(const ActionSchedule& schedule, const CheckOptions& options) {
  return WithStructure(schedule, options,
                       [&] { return CheckDeadlockFree(schedule, options.semantics); });
}

StatusOr<TimedResult> CheckAndSimulate(const ActionSchedule& schedule, const CheckOptions& options,
                                       SimulationOptions simulation) {
  simulation.semantics = options.semantics;
  StatusOr<TimedResult> timed = Internal("not simulated");
  PW_RETURN_IF_ERROR(WithStructure(schedule, options, [&] {
    timed = SimulateTimed(schedule, simulation);
    return timed.status();
  }));
  return timed;
}

}  // namespace pw::pipeline
