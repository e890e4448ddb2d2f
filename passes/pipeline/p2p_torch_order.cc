// PyTorch's `_add_send_recv` (torch.distributed.pipelining.schedules), rule for rule: on
// the same per-rank compute lists the result is the one that function returns.
//  * in rounds, each rank in increasing order looks at its next compute action;
//  * an action is ready when its input is here: stage 0's F always; another F when its
//    RECV_F is already in this rank's list, or its previous stage ran on this rank; a B or
//    I when its RECV_B is in the list, or the next stage's B/I ran on this rank; W always.
//    A fused action is ready when all its parts are;
//  * a ready action is appended, and for each part that feeds another rank its SEND goes
//    right after it and the matching RECV is appended to the receiving rank's list at once
//    (so a receiver's recvs appear in the order the senders ran);
//  * an idle cell is consumed as a turn that does nothing.
// A round where no rank moves means the compute schedule cannot be lowered; the error
// follows who waits for whom from the first stuck rank to the cause: an input whose
// producer its rank never runs, or a cycle of ranks waiting for each other.

#include "passes/pipeline/p2p_insertion.h"

namespace pw::pipeline {

namespace {

enum : uint8_t { kForwardRan = 1, kInputGradRan = 2, kRecvFHere = 4, kRecvBHere = 8 };

// The input a part waits for: the forward of the stage before, or the input gradient of
// the stage after.
Action InputOf(const Action& part) {
  if (part.type == ActionType::kForward)
    return MakeAction(ActionType::kForward, part.stage - 1, part.micro_batch);
  return MakeAction(ActionType::kBackward, part.stage + 1, part.micro_batch);
}

// Whether `a` (or one of its parts) produces `input` (any backward counts for a backward).
bool Produces(const ActionSchedule& s, const Action& a, const Action& input) {
  for (const Action& p : s.Parts(a))
    if (p.stage == input.stage && p.micro_batch == input.micro_batch &&
        (p.type == input.type || (input.type == ActionType::kBackward && IsInputBackward(p.type))))
      return true;
  return false;
}

// From the first stuck rank, who waits for whom, up to the cause: an input whose rank never
// runs its producer, or a rank met twice (a cycle).
template <typename Ready>
std::string ExplainStall(const ActionSchedule& s, const std::vector<size_t>& pos, int first,
                         const Ready& ready) {
  std::string out;
  std::vector<bool> seen(s.num_ranks(), false);
  for (int r = first;;) {
    seen[r] = true;
    const Action& at = s.ranks[r][pos[r]];
    Action input;
    for (const Action& p : s.Parts(at))
      if (!ready(r, p)) {
        input = InputOf(p);
        break;
      }
    const int q = s.stage_to_rank[input.stage];
    size_t k = pos[q];
    while (k < s.ranks[q].size() && !Produces(s, s.ranks[q][k], input)) ++k;
    const Action& producer = k < s.ranks[q].size() ? s.ranks[q][k] : input;
    out += out.empty() ? StrCat("rank ", r, " waits at ") : std::string(", which waits at ");
    out += StrCat(ActionToString(at, s), " for ", ActionToString(producer, s), " from rank ", q);
    if (k == s.ranks[q].size()) return out + StrCat(", which rank ", q, " never runs");
    if (q == r) return out + ", later in its own list";
    if (seen[q]) return out + StrCat(" (a cycle)");
    r = q;
  }
}

}  // namespace

StatusOr<ActionSchedule> InsertP2PTorchOrder(const ActionSchedule& compute) {
  if (!compute.skip_edges.empty())
    return InvalidArgument("order=torch follows PyTorch's lowering, which has no skip ",
                           "connections; use naive, parity or batched");
  const int S = compute.num_stages, M = compute.num_micro_batches, R = compute.num_ranks();
  const auto& rank_of = compute.stage_to_rank;
  ActionSchedule out;
  out.num_stages = S;
  out.num_micro_batches = M;
  out.stage_to_rank = rank_of;
  out.group_parts = compute.group_parts;
  out.group_begin = compute.group_begin;
  out.ranks.resize(R);
  for (int r = 0; r < R; ++r) out.ranks[r].reserve(compute.ranks[r].size() * 3);
  std::vector<uint8_t> flags(static_cast<size_t>(S) * M, 0);
  auto at = [&](int s, int m) -> uint8_t& { return flags[static_cast<size_t>(s) * M + m]; };

  auto ready = [&](int r, const Action& p) {
    const int s = p.stage, m = p.micro_batch;
    switch (p.type) {
      case ActionType::kForward:
        if (s == 0 || (at(s, m) & kRecvFHere)) return true;
        return rank_of[s - 1] == r && (at(s - 1, m) & kForwardRan);
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
        if (s == S - 1 || (at(s, m) & kRecvBHere)) return true;
        return rank_of[s + 1] == r && (at(s + 1, m) & kInputGradRan);
      default:
        return true;
    }
  };
  // Appends the action's SEND after it and the RECV to the receiver.
  auto emit_comms = [&](int r, const Action& p) {
    const int s = p.stage, m = p.micro_batch;
    if (p.type == ActionType::kForward) {
      at(s, m) |= kForwardRan;
      if (s == S - 1 || rank_of[s + 1] == r) return;
      out.ranks[r].push_back(MakeAction(ActionType::kSendF, s, m));
      out.ranks[rank_of[s + 1]].push_back(MakeAction(ActionType::kRecvF, s + 1, m));
      at(s + 1, m) |= kRecvFHere;
    } else if (IsInputBackward(p.type)) {
      at(s, m) |= kInputGradRan;
      if (s == 0 || rank_of[s - 1] == r) return;
      out.ranks[r].push_back(MakeAction(ActionType::kSendB, s, m));
      out.ranks[rank_of[s - 1]].push_back(MakeAction(ActionType::kRecvB, s - 1, m));
      at(s - 1, m) |= kRecvBHere;
    }
  };

  std::vector<size_t> pos(R, 0);
  std::vector<int> active;
  for (int r = 0; r < R; ++r)
    if (!compute.ranks[r].empty()) active.push_back(r);
  while (!active.empty()) {
    bool progress = false;
    for (int r : active) {
      const Action& a = compute.ranks[r][pos[r]];
      bool all_ready = true;
      for (const Action& p : compute.Parts(a)) all_ready = all_ready && ready(r, p);
      if (!all_ready) continue;
      if (a.type != ActionType::kIdle) {
        out.ranks[r].push_back(a);
        for (const Action& p : compute.Parts(a)) emit_comms(r, p);
      }
      ++pos[r];
      progress = true;
    }
    std::erase_if(active, [&](int r) { return pos[r] >= compute.ranks[r].size(); });
    if (!progress)
      return FailedPrecondition("order=torch cannot place sends and recvs (PyTorch would fail ",
                                "too): ", ExplainStall(compute, pos, active.front(), ready));
  }
  return out;
}

}  // namespace pw::pipeline
