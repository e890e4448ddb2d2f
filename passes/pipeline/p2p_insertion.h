#pragma once
// Lowers a compute-only schedule to one with SEND/RECV actions for every value that
// crosses ranks: adjacent stages, non-adjacent ones (skip connections), none between
// stages on the same rank (the V turn hands over directly).
//
// Placement and order policies:
//  * naive:   each send right after its producer, each recv right before its consumer;
//             between two compute actions the sends go first, then the recvs, earlier
//             stages first.
//             Deadlock-free under eager (isend/irecv) semantics.
//  * parity:  for blocking (rendezvous) p2p. Sends and recvs are placed in the order the
//             transfers happen in an eager run of the schedule (at P2POptions::costs: unit
//             costs unless the caller prices the stages), so that both
//             ends of every transfer agree on its place; transfers at the same time go in
//             Megatron's even/odd order (even ranks send to the next rank, receive from the
//             previous, send to the previous, receive from the next; odd ranks receive from
//             the previous, send to the next, ...), which pairs neighbours up.
//  * batched: the same order, and every run of sends/recvs between two compute actions is
//             one BATCH_P2P exchange (batch_isend_irecv), as Megatron's batched p2p.
//  * megatron: Megatron-LM's exchanges (p2p_megatron_order.cc): between two steps of a
//             rank one exchange of the sends before and the recvs after; an interleaved
//             rank's F and the B after it are one step, so the F's output leaves after the
//             B. For blocking p2p; 1F1B and interleaved 1F1B only.
//  * torch:   PyTorch's `_add_send_recv` (torch.distributed.pipelining.schedules): ranks
//             take turns in order; a sender appends the matching recv to the receiver's
//             list. The result equals `_add_send_recv(compute)` on the same per-rank lists,
//             idle cells included (as PyTorch's test_schedule.py test_send_recv calls it);
//             with merge_backward it equals `_add_send_recv(_merge_bw(compute))` (as its
//             test_csv_compare lowers the ZB1P artifact). PyTorch's runtime lowering of a
//             compute-only schedule (`_PipelineScheduleRuntime`) calls `_add_send_recv`
//             without `_merge_bw`.

#include <string_view>

#include "ir/action.h"
#include "ir/status.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {

enum class P2POrder { kNaive, kParity, kBatched, kMegatron, kTorch };
StatusOr<P2POrder> ParseP2POrder(std::string_view name);
const char* P2POrderName(P2POrder order);
// The semantics a policy is designed for (and checked under): eager for naive and torch,
// rendezvous (blocking p2p) for parity, batched and megatron.
CommSemantics DesignedSemantics(P2POrder order);

struct P2POptions {
  P2POrder order = P2POrder::kNaive;
  // order=torch only: run PyTorch's `_merge_bw` first (drops idle cells and fuses an I
  // directly followed by its W into one B).
  bool merge_backward = false;
  // order=parity and batched: the costs of the eager run whose transfer times order the
  // sends and recvs. A schedule planned with other costs (zb-auto's W cheaper than F) runs
  // its transfers in another order than unit costs give, and a batch that waits for a
  // transfer due later holds the compute stream.
  ActionCosts costs;
};

StatusOr<ActionSchedule> InsertP2P(const ActionSchedule& compute, const P2POptions& options);

// PyTorch's `_merge_bw`: drops idle cells and merges an I immediately followed (on the same
// rank) by its W into one B.
ActionSchedule MergeBackward(const ActionSchedule& compute);

// torch order (p2p_torch_order.cc).
StatusOr<ActionSchedule> InsertP2PTorchOrder(const ActionSchedule& compute);
// megatron order (p2p_megatron_order.cc).
StatusOr<ActionSchedule> InsertP2PMegatronOrder(const ActionSchedule& compute);

}  // namespace pw::pipeline
