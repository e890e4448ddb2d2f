#include "passes/pipeline/schedule_checker.h"

#include <algorithm>

#include "ir/action_edges.h"

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
    PW_RETURN_IF_ERROR(CheckShape());
    stage_.assign(static_cast<size_t>(S_) * M_, 0);
    edge_.assign(static_cast<size_t>(edges_.num_edges()) * M_, 0);
    for (int r = 0; r < s_.num_ranks(); ++r) {
      const auto& actions = s_.ranks[r];
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        if (a.type == ActionType::kIdle) continue;
        if (IsFused(a.type) &&
            (a.micro_batch < 0 || static_cast<size_t>(a.micro_batch) + 1 >= s_.group_begin.size()))
          return InvalidArgument("rank ", r, ", action ", i, ": fused action without parts");
        if (!IsFused(a.type) && Fast(r, a)) continue;
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

  // The common case without building a Status: a valid action on a chain-only schedule.
  // Changes nothing unless every rule holds; on false, CheckPart finds and names the error.
  bool Fast(int r, const Action& p) {
    const int s = p.stage, m = p.micro_batch;
    if (skips_ || s < 0 || s >= S_ || m < 0 || m >= M_ || RankOf(s) != r) return false;
    uint8_t& bits = StageAt(s, m);
    switch (p.type) {
      case ActionType::kForward:
        if (bits & kF) return false;
        if (comm_ && s > 0 && RankOf(s - 1) != r && !(EdgeAt(s - 1, m) & kRecvF)) return false;
        bits |= kF;
        return true;
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
        if ((bits & (kB | kI)) || !(bits & kF)) return false;
        if (comm_ && s + 1 < S_ && RankOf(s + 1) != r && !(EdgeAt(s, m) & kRecvB)) return false;
        bits |= p.type == ActionType::kBackward ? kB : kI;
        return true;
      case ActionType::kBackwardWeight:
        if ((bits & (kW | kB)) || !(bits & kI)) return false;
        bits |= kW;
        return true;
      default:
        break;
    }
    if (p.peer >= 0) return false;
    const bool from_lower = p.type == ActionType::kRecvF || p.type == ActionType::kSendB;
    const int e = from_lower ? s - 1 : s;
    if (e < 0 || e >= S_ - 1 || RankOf(e) == RankOf(e + 1)) return false;
    uint8_t& edge = EdgeAt(e, m);
    uint8_t bit;
    switch (p.type) {
      case ActionType::kSendF:
        if (!(bits & kF)) return false;
        bit = kSendF;
        break;
      case ActionType::kRecvF:
        bit = kRecvF;
        break;
      case ActionType::kSendB:
        if (!(bits & (kB | kI))) return false;
        bit = kSendB;
        break;
      default:
        bit = kRecvB;
        break;
    }
    if (edge & bit) return false;
    edge |= bit;
    return true;
  }

  Status CheckShape() const {
    if (S_ < 1 || M_ < 1) return InvalidArgument("schedule has no stages or micro-batches");
    if (static_cast<int>(s_.stage_to_rank.size()) != S_)
      return InvalidArgument("placement lists ", s_.stage_to_rank.size(), " stages, schedule has ",
                             S_);
    for (int s = 0; s < S_; ++s)
      if (RankOf(s) < 0 || RankOf(s) >= s_.num_ranks())
        return InvalidArgument("stage ", s, " is placed on rank ", RankOf(s), " but there are ",
                               s_.num_ranks(), " ranks");
    for (const StageEdge& e : s_.skip_edges)
      if (e.src < 0 || e.dst >= S_ || e.dst <= e.src + 1)
        return InvalidArgument("bad skip edge ", e.src, "->", e.dst);
    return OkStatus();
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

  Status CheckComplete() {
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

}  // namespace

Status CheckSchedule(const ActionSchedule& schedule, const CheckOptions& options) {
  PW_RETURN_IF_ERROR(CheckStructure(schedule));
  PW_RETURN_IF_ERROR(CheckMemory(schedule, options));
  return CheckDeadlockFree(schedule, options.semantics);
}

StatusOr<TimedResult> CheckAndSimulate(const ActionSchedule& schedule, const CheckOptions& options,
                                       SimulationOptions simulation) {
  PW_RETURN_IF_ERROR(CheckStructure(schedule));
  PW_RETURN_IF_ERROR(CheckMemory(schedule, options));
  simulation.semantics = options.semantics;
  return SimulateTimed(schedule, simulation);
}

}  // namespace pw::pipeline
