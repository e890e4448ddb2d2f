#include "executor/run_report.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

namespace pw {

std::string StepReportLine(const RankStepReport& r) {
  char loss[64];
  std::snprintf(loss, sizeof(loss), "%.17g", r.loss_sum);
  return StrCat("step ", r.step, " ", r.loss_count, " ", r.step_ms, " ", r.peak_bytes, " ", loss,
                " ", r.checkpoint_bytes, " ", r.checkpoint_ms, " ", r.resume_ms, " ", r.warmup_ms,
                " ", r.redone ? 1 : 0, " ", r.cpu_ms, "\n");
}

bool ParseStepReport(const std::string& line, RankStepReport* r) {
  std::istringstream in(line);
  std::string word;
  RankStepReport parsed;
  parsed.rank = r->rank;
  int redone = 0;
  if (!(in >> word >> parsed.step >> parsed.loss_count >> parsed.step_ms >> parsed.peak_bytes >>
        parsed.loss_sum >> parsed.checkpoint_bytes >> parsed.checkpoint_ms >> parsed.resume_ms >>
        parsed.warmup_ms >> redone >> parsed.cpu_ms) ||
      word != "step")
    return false;
  parsed.redone = redone != 0;
  *r = parsed;
  return true;
}

StatusOr<std::string> MakeRunDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data()))
    return Internal("cannot create a run directory in ",
                    std::filesystem::temp_directory_path().string());
  return tmpl;
}

RemovedAtExit::~RemovedAtExit() {
  if (path.empty()) return;
  std::error_code ignored;  // a folder left behind costs disk, not the answer
  std::filesystem::remove_all(path, ignored);
}

}  // namespace pw
