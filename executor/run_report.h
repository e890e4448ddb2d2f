#pragma once
// What the launcher side of `run-parallel` and `ab` share with their rank processes: the
// line a rank writes to the report pipe after each step ("step S COUNT MS BYTES LOSS_SUM
// CHECKPOINT_BYTES CHECKPOINT_MS RESUME_MS", the loss sum to 17 digits so that it reads back
// exactly) and a fresh run directory.

#include <string>

#include "executor/rank_runner.h"
#include "ir/status.h"

namespace pw {

std::string StepReportLine(const RankStepReport& report);  // ends with '\n'
// False for a line that is not a step report (`report->rank` is left as it is).
bool ParseStepReport(const std::string& line, RankStepReport* report);

// A new directory for a run's store and files: <temp dir>/<prefix>-XXXXXX.
StatusOr<std::string> MakeRunDir(const std::string& prefix);

// Removes `path` and all it holds when the scope ends, on every way out (nothing while empty).
struct RemovedAtExit {
  std::string path;
  RemovedAtExit() = default;
  RemovedAtExit(const RemovedAtExit&) = delete;
  RemovedAtExit& operator=(const RemovedAtExit&) = delete;
  ~RemovedAtExit();
};

}  // namespace pw
