#pragma once
// Measures communication for the comm model: all-reduce over several group sizes and
// send/recv, each over a range of message sizes, fitted per (kind, group size) with
// FitCommSamples. The measuring itself is behind CommBenchmark, because it needs a real
// transport (the executor's Gloo communicator in rank processes, wired up in tools/), which
// the cost model may not depend on.
//
// Communication on a CPU is measured in the conditions of the run it prices: as many rank
// processes as the run has, every group communicating at once, and before every operation
// the thread that issues it computes for as long as the run computes between two of its
// communications (the duty cycle). The sizes are interleaved round by round, so that a
// change in the machine's load touches every size alike. On two cores shared by four ranks
// this is what decides the price: the transport's threads must be woken on cores the
// ranks' compute keeps busy, and Gloo's event loop spins while another thread of its rank
// holds the connection's lock and waits for a core, which costs both time and CPU.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "cost_model/sim_graph.h"

namespace pw::cost {

// One measurement: `ranks` rank processes, every group (all-reduce) or pipeline pair
// (send/recv) doing the same at once, `warmup` rounds over `sizes`, then at least `repeats`
// measured ones and more until they took `seconds` (a load that comes and goes is met
// in its proportions, not as it was in one instant).
struct CommRun {
  CommKind kind = CommKind::kAllReduce;
  int group_size = 2;
  int ranks = 2;
  std::vector<int64_t> sizes;
  double compute_gap = 0;  // CPU seconds computed before each operation
  int warmup = 3;
  int repeats = 10;
  double seconds = 0;
};

struct CommRunResult {
  // Per size, per operation: seconds from the last member's arrival (all-reduce) or from
  // the later of send and recv being posted (send/recv) until it completed.
  std::vector<std::vector<double>> seconds;
  // CPU seconds a rank process spent per operation besides its compute gaps: the issuing
  // thread's share and the transport's threads (their spinning included).
  double cpu_per_op = 0;
  // All-reduce: mean seconds from the members' mean arrival to the last one's.
  double straggle = 0;
};

class CommBenchmark {
 public:
  virtual ~CommBenchmark() = default;
  virtual StatusOr<CommRunResult> Measure(const CommRun& run) = 0;
};

struct CommProfileOptions {
  // Measured for every kind, plus the sizes a module moves (CommSizesOf).
  std::vector<int64_t> sizes = {4 << 10, 64 << 10, 1 << 20};
  std::vector<int64_t> extra_allreduce_sizes;
  std::vector<int64_t> extra_p2p_sizes;
  std::vector<int> allreduce_groups = {2};
  int ranks = 0;           // rank processes of the run (0: just the group)
  double compute_gap = 0;  // the run's compute between two communications of a rank
  int warmup = 3;
  int repeats = 12;
  double seconds = 2;                                // per kind
  std::function<void(const std::string&)> progress;  // "all_reduce over 2 ranks", ...
};

StatusOr<std::vector<CommFit>> ProfileComm(CommBenchmark& bench, const CommProfileOptions& options);

// What a lowered plan communicates: all-reduce group sizes and message sizes, transfer
// sizes (each distinct, sorted), and its duty cycle: the compute seconds (each instruction
// plus `op_overhead`) a rank runs per communication it takes part in, averaged over ranks.
struct CommSizes {
  std::vector<int> allreduce_groups;
  std::vector<int64_t> allreduce_bytes;
  std::vector<int64_t> p2p_bytes;
  double compute_gap = 0;
};
CommSizes CommSizesOf(const SimGraph& graph, double op_overhead = 0);

}  // namespace pw::cost
