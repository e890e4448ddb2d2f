#pragma once
// Which jobs of a 1F1B-style plan overlap-1f1b runs together: on every rank, each
// backward B(i) and the forward F(j) that follows it (the steady phase), and where 1F1B
// has no B beside an F, consecutive forwards F(i), F(i+1) (warm-up) and consecutive
// backwards (cool-down) whose inputs are made on the rank itself (the first stage's
// forwards, the last stage's backwards: elsewhere the second input arrives a job later
// and would hold the first back). Consecutive forwards of a later stage are paired too
// where the action-level simulator finds the plan no slower with the pair (the rank's
// warm-up has slack for the wait). A pair becomes one fused OVERLAP_F_B action; groups the plan
// already has (dualpipe-v's) stay as they are. The send/recv actions are placed again
// around the fused actions (recvs of both parts before, sends after; insert-p2p's naive
// order) and the result is checked deadlock-free under eager p2p.
//
// A fused job starts once both parts' inputs are there. In 1F1B's steady phase B(i)'s
// gradient arrives just in time, so pairing B(i) with the very next forward makes each
// rank wait for its neighbours' fused jobs in turn and halves the steady throughput.
// Running each rank's forwards `c`·(ranks-1-r) slots earlier (more forwards before the
// first backward, as eager-1f1b does for c = 1) gives the pairs the slack they need. The
// choice is made with the action-level simulator under the stage costs given: the
// smallest c whose fused plan is no slower than the plan as it came (else the fastest).

#include <vector>

#include "ir/action.h"
#include "ir/status.h"
#include "simulator/action_simulator.h"

namespace pw {

struct FusePairsOptions {
  bool warmup_cooldown = true;  // also pair F with F and B with B
  ActionCosts costs;            // stage costs for choosing how early forwards run
  int max_shift = 2;            // c tried from 0 to this (0: no forward runs earlier)
};

struct FusedPairs {
  ActionSchedule schedule;                         // with send/recv actions
  int steady = 0;                                  // B, F pairs
  int warmup = 0;                                  // F, F pairs
  int late_forward_pairs = 0;                      // of them, of a later stage's forwards
  int cooldown = 0;                                // B, B pairs
  int existing = 0;                                // fused groups the plan had
  int shift = 0;                                   // c
  double makespan_before = 0, makespan_after = 0;  // action-level, under `costs`
  // The most micro-batches in flight on any rank (forwards run whose backward has not),
  // before and after: what running forwards earlier costs in activation memory.
  int peak_in_flight_before = 0, peak_in_flight_after = 0;
};

StatusOr<FusedPairs> FuseIndependentPairs(const ActionSchedule& plan,
                                          const FusePairsOptions& options);

}  // namespace pw
