#pragma once
// Measures communication for the comm model: all-reduce over several group sizes and
// send/recv, each over a range of message sizes, fitted per (kind, group size) with
// FitCommSamples. The measuring itself is behind CommBenchmark, because it needs a real
// transport (the executor's Gloo communicator, wired up in tools/), which the cost model
// may not depend on.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "cost_model/sim_graph.h"

namespace pw::cost {

class CommBenchmark {
 public:
  virtual ~CommBenchmark() = default;
  // Seconds per operation for each of `repeats` runs (after `warmup`), for every entry of
  // `sizes` in order: an all-reduce over `group_size` ranks, or a one-way transfer between
  // two ranks (group_size 2) for kSendRecv. `ranks` ranks take part, every group of them (or
  // pair) doing the same at once, as the groups of a run's mesh do; meanwhile `busy_cores`
  // other threads keep cores busy, as other ranks' compute does in a run.
  virtual StatusOr<std::vector<std::vector<double>>> Measure(CommKind kind, int group_size,
                                                             int ranks,
                                                             const std::vector<int64_t>& sizes,
                                                             int busy_cores, int warmup,
                                                             int repeats) = 0;
};

struct CommProfileOptions {
  // Measured for every kind, plus the sizes a module moves (CommSizesOf).
  std::vector<int64_t> sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  std::vector<int64_t> extra_allreduce_sizes;
  std::vector<int64_t> extra_p2p_sizes;
  std::vector<int> allreduce_groups = {2, 4};
  std::vector<int> busy_cores = {0, 2};  // loads to measure under (this machine: 2 cores)
  int ranks = 0;                         // ranks of the run on this node (0: just the group)
  int warmup = 3;
  int repeats = 10;
  std::function<void(const std::string&)> progress;  // "all_reduce over 2 ranks, ...", ...
};

StatusOr<std::vector<CommFit>> ProfileComm(CommBenchmark& bench, const CommProfileOptions& options);

// What a lowered plan communicates: all-reduce group sizes and message sizes, transfer
// sizes (each distinct, sorted).
struct CommSizes {
  std::vector<int> allreduce_groups;
  std::vector<int64_t> allreduce_bytes;
  std::vector<int64_t> p2p_bytes;
};
CommSizes CommSizesOf(const SimGraph& graph);

}  // namespace pw::cost
