#pragma once
// order-comm's search: the order (and batching) of every rank's sends and recvs that
// gives the lowest simulated makespan. No fixed rule is best once skip connections cross
// stages (always the earlier stage first, or the later, leaves some stage waiting on a
// peer that is itself waiting), so the search starts from the best of the fixed orders
// (naive, parity, batched, and megatron for 1F1B and interleaved 1F1B; p2p_insertion.h)
// that is valid under the target's semantics and improves it by local moves, keeping a
// move when the action-level simulator's makespan falls and the schedule checker proves
// the result deadlock-free:
//  * swap two neighbouring actions of a rank where at least one is a send or recv (a
//    recv posted earlier, a send issued later, two transfers reordered); when both are
//    transfers with the same peer rank, their matches on the peer swap too, so the pair
//    keeps one order on both sides, which blocking (NCCL) p2p needs;
//  * join two neighbouring transfers into one BATCH_P2P exchange, or split one.

#include <string>

#include "ir/action.h"
#include "ir/status.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {

struct CommOrderOptions {
  ActionCosts costs;
  // rendezvous for NCCL-style blocking p2p, eager for isend/irecv.
  CommSemantics semantics = CommSemantics::kRendezvous;
  int max_evaluations = 5000;  // simulations the search may run
};

struct FixedOrderMakespan {
  std::string order;   // naive, parity or batched
  bool valid = false;  // deadlock-free under the semantics
  double makespan = 0;
};

struct CommOrderResult {
  ActionSchedule schedule;
  double makespan = 0;
  std::string start;  // the fixed order the search started from
  std::vector<FixedOrderMakespan> fixed;
  int evaluations = 0;
  int accepted_moves = 0;
};

// `compute` has no send/recv actions yet (skip edges set).
StatusOr<CommOrderResult> SearchCommOrder(const ActionSchedule& compute,
                                          const CommOrderOptions& options);

}  // namespace pw::pipeline
