// Megatron-LM's placement of pipeline transfers (megatron/core/pipeline_parallel/
// schedules.py, without overlap_p2p_comm), rule for rule:
//  * a rank's compute actions form steps: one action, except that with several stages a
//    rank (the interleaved schedule) a forward directly followed by a backward is one step
//    in the steady state (`forward_backward_pipelining_with_interleaving` runs F, then B,
//    then one exchange), which a rank has when a forward follows a backward;
//  * between two steps one exchange: the sends of the step before and the recvs of the step
//    after (Megatron's send_forward_recv_forward, send_forward_backward_recv_forward_backward,
//    send_backward_recv_backward; without interleaving send_forward_recv_backward and
//    send_backward_recv_forward), as one batch_isend_irecv when it has several parts;
//  * a recv before the first step (recv_forward), the last step's sends after it.
// So an interleaved rank's forward output leaves only after the backward that follows it,
// which is what Megatron's interleaved runs paid; the batched order sends it at once.
// Megatron runs 1F1B and interleaved 1F1B on a chain of stages: zero-bubble parts, fused
// actions and skip connections are refused.

#include "passes/pipeline/p2p_insertion.h"

namespace pw::pipeline {

namespace {

bool IsMegatronAction(ActionType t) {
  return t == ActionType::kForward || t == ActionType::kBackward || t == ActionType::kIdle;
}

}  // namespace

StatusOr<ActionSchedule> InsertP2PMegatronOrder(const ActionSchedule& compute) {
  if (!compute.skip_edges.empty())
    return InvalidArgument("order=megatron places Megatron-LM's exchanges on a chain of ",
                           "stages; this schedule has skip connections (use order=batched)");
  const int S = compute.num_stages, R = compute.num_ranks();
  const auto& rank_of = compute.stage_to_rank;
  for (int r = 0; r < R; ++r)
    for (const Action& a : compute.ranks[r]) {
      if (IsComm(a.type) || a.type == ActionType::kBatchP2P)
        return FailedPrecondition("the schedule already has send/recv actions");
      if (!IsMegatronAction(a.type))
        return InvalidArgument("order=megatron places Megatron-LM's exchanges, whose schedules ",
                               "are 1F1B and interleaved 1F1B; rank ", r, " runs ",
                               ActionToString(a, compute), " (use order=batched)");
    }
  const bool interleaved = S > R;
  ActionSchedule out;
  out.num_stages = S;
  out.num_micro_batches = compute.num_micro_batches;
  out.stage_to_rank = rank_of;
  out.ranks.resize(R);

  auto remote = [&](int r, int s) { return s >= 0 && s < S && rank_of[s] != r; };
  // The recv a compute action needs before it, or the send it owes after it (kIdle: none).
  auto recv_of = [&](int r, const Action& a) {
    const bool forward = a.type == ActionType::kForward;
    return remote(r, forward ? a.stage - 1 : a.stage + 1)
               ? MakeAction(forward ? ActionType::kRecvF : ActionType::kRecvB, a.stage,
                            a.micro_batch)
               : Action{};
  };
  auto send_of = [&](int r, const Action& a) {
    const bool forward = a.type == ActionType::kForward;
    return remote(r, forward ? a.stage + 1 : a.stage - 1)
               ? MakeAction(forward ? ActionType::kSendF : ActionType::kSendB, a.stage,
                            a.micro_batch)
               : Action{};
  };

  for (int r = 0; r < R; ++r) {
    std::vector<Action> steps_actions;
    for (const Action& a : compute.ranks[r])
      if (a.type != ActionType::kIdle) steps_actions.push_back(a);
    // Megatron pairs a forward with a backward in the steady state only: a rank whose
    // warm-up holds every forward (more warm-up micro-batches than it runs) has none, and
    // its last forward and first backward exchange apart (recv_backward before the B).
    bool steady = false;
    for (size_t i = 1; i < steps_actions.size() && !steady; ++i)
      steady = steps_actions[i].type == ActionType::kForward &&
               steps_actions[i - 1].type == ActionType::kBackward;
    auto& actions = out.ranks[r];
    actions.reserve(steps_actions.size() * 2 + 1);
    std::vector<Action> exchange;
    auto add = [&](const Action& c) {
      if (c.type != ActionType::kIdle) exchange.push_back(c);
    };
    auto flush = [&] {
      if (exchange.size() > 1) {
        actions.push_back(out.AddGroup(ActionType::kBatchP2P, exchange));
      } else {
        actions.insert(actions.end(), exchange.begin(), exchange.end());
      }
      exchange.clear();
    };
    for (size_t i = 0; i < steps_actions.size();) {
      const bool pair = interleaved && steady && i + 1 < steps_actions.size() &&
                        steps_actions[i].type == ActionType::kForward &&
                        steps_actions[i + 1].type == ActionType::kBackward;
      const size_t end = i + (pair ? 2 : 1);
      for (size_t k = i; k < end; ++k) add(recv_of(r, steps_actions[k]));
      flush();
      for (size_t k = i; k < end; ++k) actions.push_back(steps_actions[k]);
      for (size_t k = i; k < end; ++k) add(send_of(r, steps_actions[k]));
      i = end;
    }
    flush();
  }
  return out;
}

}  // namespace pw::pipeline
