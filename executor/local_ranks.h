#pragma once
// Runs every rank of a module as a thread of this process, over the in-process transport:
// a whole dp × pp × mp job without processes or sockets. Tests and benchmarks use it; a
// framework can use it to try a plan on one machine before launching it for real.

#include <map>
#include <string>
#include <vector>

#include "executor/rank_runner.h"

namespace pw {

struct LocalRunResult {
  std::vector<std::vector<RankStepReport>> reports;   // [rank][step]
  std::vector<std::map<std::string, Tensor>> params;  // [rank], after the last step
  // Per step: the mean loss over every micro-batch of every replica.
  std::vector<double> Losses() const;
  // Per step: the slowest rank's step time.
  std::vector<double> StepTimesMs() const;
  // Per rank: the peak over steps.
  std::vector<int64_t> PeakBytes() const;
};

// `options` applies to every rank (its rank field is ignored). The kernels of every rank
// run on `kernel_threads` BLAS threads (1: the ranks' streams are the parallelism).
StatusOr<LocalRunResult> RunLocalRanks(const Module& module, const RankRunOptions& options,
                                       int kernel_threads = 1);

}  // namespace pw
