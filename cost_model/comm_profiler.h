#pragma once
// Measures communication for the comm model inside a short real run of a plan: its rank
// processes train it for a few steps on the executor with a clock around every all-reduce,
// send and recv, and the operations are fitted per (kind, group size) with FitCommSamples.
// The running itself is behind CommBenchmark, because it needs the executor and a real
// transport (wired up in tools/), which the cost model may not depend on.
//
// Why inside a run: on a CPU node that several ranks share, what communication costs is
// decided by what runs beside it. A stream blocked on its peers must be woken on cores the
// ranks' compute keeps busy (and, with --transfers gloo, Gloo's network threads too, whose
// event loop spins while a caller holds the connection's lock and waits for a core); how
// often that happens depends on the whole run's rhythm (the compute between
// communications, the pipeline's waits, the other streams), which a benchmark of
// communication alone does not have. What the run yields
// per operation: its time from the moment every member was there, how far behind the
// others the last member of a group arrived (the straggle), and the CPU it cost.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "ir/module.h"
#include "ir/stream_spin.h"

namespace pw::cost {

// One operation of a measured run (after its first step).
struct MeasuredComm {
  CommKind kind = CommKind::kAllReduce;
  int group_size = 2;  // 2 for send/recv
  int64_t bytes = 0;
  // From the last member's arrival (all-reduce) or from the later of send and recv being
  // posted (send/recv) until it completed.
  double seconds = 0;
  double straggle = 0;          // all-reduce: the last arrival after the members' mean arrival
  bool on_comm_stream = false;  // a collective on a communication stream, not a compute one
};

struct CommRunResult {
  std::vector<MeasuredComm> ops;
  int ranks = 0;
  int measured_steps = 0;
  // CPU seconds the rank processes spent in the measured steps (every thread).
  double process_cpu = 0;
  // Each measured step's time, the slowest rank's (as `pipeweave run` reports a step).
  std::vector<double> step_seconds;
  // Waits for another stream's event that the ranks' threads ended spinning, over the
  // measured steps (all ranks).
  CaughtSpins caught;
};

class CommBenchmark {
 public:
  virtual ~CommBenchmark() = default;
  // Trains `plan` for `steps` steps on its ranks and reports every operation of the steps
  // after the first.
  virtual StatusOr<CommRunResult> Run(const Module& plan, int steps) = 0;
};

struct CommProfileOptions {
  int steps = 6;
  // The run's compute CPU seconds per measured step, over all ranks (from the op costs):
  // what the processes spent beyond it is charged to communication.
  double compute_seconds = 0;
  double compute_gap =
      0;  // recorded with the fits (CommSizes::compute_gap, simulator/comm_sizes.h)
};

struct CommProfile {
  std::vector<CommFit> fits;  // one per (kind, group size)
  // The run's step: the median of its measured steps (0 where the run reported none).
  double step_seconds = 0;
  // The waits its threads caught spinning (CommRunResult).
  CaughtSpins caught;
};

// Runs `plan` and fits what it measured.
StatusOr<CommProfile> ProfileComm(CommBenchmark& bench, const Module& plan,
                                  const CommProfileOptions& options);
// The fitting alone: samples at every size the run moved (their mean time), the mean
// straggle, and the CPU per operation (what the processes spent beyond the compute and the
// waits caught spinning).
std::vector<CommFit> FitMeasuredComm(const CommRunResult& run, const CommProfileOptions& options);

}  // namespace pw::cost
