#pragma once
// What a lowered plan communicates, read off its op-level simulation graph: the sizes the
// comm profiler measures a plan at, and the compute between its communications. It lives
// beside the graph it reads, so that the prices (cost_model/) need not know the simulator.

#include <cstdint>
#include <vector>

#include "simulator/sim_graph.h"

namespace pw::cost {

// What a lowered plan communicates: all-reduce group sizes and message sizes, transfer
// sizes (each distinct, sorted), its duty cycle (the compute seconds, each instruction plus
// `op_overhead`, a rank runs per communication it takes part in, averaged over ranks), and
// the compute seconds of all ranks together.
struct CommSizes {
  std::vector<int> allreduce_groups;
  std::vector<int64_t> allreduce_bytes;
  std::vector<int64_t> p2p_bytes;
  double compute_gap = 0;
  double compute_seconds = 0;
};
CommSizes CommSizesOf(const SimGraph& graph, double op_overhead = 0);

}  // namespace pw::cost
