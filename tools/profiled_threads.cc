#include "tools/profiled_threads.h"

#include <cstdio>

#include "executor/process_resources.h"

namespace pw::tools {

int RunThreads(int requested, int processes) { return ComputeThreads(requested, processes); }

Status CheckProfiledThreads(const cost::OpCostTable& table, int processes, int requested) {
  const int profiled = table.proto().blas_threads();
  if (table.device() != "cpu" || profiled <= 0 || table.size() == 0) return OkStatus();
  const int run = RunThreads(requested, processes);
  if (run == profiled) return OkStatus();
  return FailedPrecondition("the cost table was profiled at ", profiled, " kernel thread",
                            profiled == 1 ? "" : "s", " per process, but ", processes,
                            processes == 1 ? " process runs with " : " rank processes run with ",
                            run, " each here: profile again with --threads ", run,
                            " (or simulate with --threads ", profiled, ")");
}

std::string OtherScheduleNote(const cost::OpCostTable& table, const std::string& schedule) {
  if (table.device() != "cpu" || table.proto().in_run_schedules().empty() ||
      table.ProfiledInRunOf(schedule))
    return "";
  const std::string head = "its ops were timed in runs of " + table.InRunSchedulesText() +
                           " plans, this plan is " + schedule;
  const std::string own =
      "profile it with the others (pipeweave profile PLAN.pb OTHER.pb --in-run: one table, each "
      "schedule's costs kept apart)";
  if (table.proto().has_stale_price()) {
    char priced[160];
    std::snprintf(priced, sizeof priced,
                  ": its order is priced by what its ops find beyond a %lld KiB cache (%.3f ns a "
                  "byte, fitted over those runs); to measure it, ",
                  static_cast<long long>(table.proto().stale_capacity() >> 10),
                  table.proto().stale_price() * 1e9);
    return head + priced + own;
  }
  return head +
         ": on a CPU the order of a rank's jobs moves what its ops cost; to price it with "
         "its own, " +
         own;
}

}  // namespace pw::tools
