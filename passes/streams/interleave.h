#pragma once
// Interleaving two independent jobs on one rank's compute stream so that the collectives
// of each run under the other's compute (overlap-1f1b).
//
// Each job is a chain of ops in program order: compute ops run one after another on the
// compute stream, collectives on a communication link that one collective at a time uses
// (in the order the host issues them). A collective starts once the compute op before it
// in its chain has finished; a compute op that reads a collective's result waits for it.
// Interleave() list-schedules the two chains under these rules with estimated times:
// collectives are issued as soon as their chain reaches them, and of the two chains' next
// compute ops the one that can start first runs, ties going to the chain whose next
// collective is fewer compute-seconds away (so that the link gets work early), then to the
// chain already running. The merged order it returns is the cut: every switch from one
// chain to the other ends a segment. With `same_program` (two micro-batches of one
// program), the second chain never runs an op before the first chain has run it, so that
// what both accumulate (gradient sums) is summed in micro-batch order as before.

#include <utility>
#include <vector>

namespace pw {

struct ChainOp {
  double seconds = 0;
  bool collective = false;
  int waits_for = -1;  // the last collective of the same chain whose result it reads; -1: none
};

struct Interleaving {
  std::vector<std::pair<int, int>> order;  // (chain, op), in the order the host issues them
  double makespan = 0;                     // when both chains are done
  double exposed = 0;                      // time the compute stream idles on collectives
  int segments = 0;                        // runs of one chain in `order`
};

struct InterleaveOptions {
  double event_latency = 0;  // added to every hand-over between compute and the link
  bool same_program = false;
  bool lead_first = false;
};

Interleaving Interleave(const std::vector<ChainOp>& first, const std::vector<ChainOp>& second,
                        const InterleaveOptions& options);

// The two chains back to back (first, then second), under the same model.
Interleaving BackToBack(const std::vector<ChainOp>& first, const std::vector<ChainOp>& second,
                        const InterleaveOptions& options);

}  // namespace pw
