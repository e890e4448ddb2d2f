#pragma once
// Starts the rank processes of a run on this machine and watches them. Each rank is this
// executable again (fork + exec), with `--rank R --world-size N --store DIR/store
// --report-fd FD` appended to its arguments; it reports progress as text lines on the
// pipe FD. When a rank dies or fails, the launcher publishes an abort notice naming it in
// the store (every other rank's watchdog stops that rank within a poll), waits a grace
// period, kills what is left, and returns the failure: a run never hangs.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "ir/status.h"

namespace pw {

struct LaunchOptions {
  std::string executable = "/proc/self/exe";
  std::vector<std::string> args;  // argv[1..] of every rank, before the rank flags
  int nproc = 1;
  std::string run_dir;  // holds the store; created when missing
  // The run's store; empty: the directory run_dir/store. A Redis store lets ranks on other
  // hosts (rank_prefix) meet; each rank then listens on its route's address to the store.
  std::string store;
  // Put before each rank's command line, with "{rank}" and "{host}" (rank + 1) replaced:
  // starts rank R elsewhere, e.g. "scripts/netns_cluster.sh exec --name pw {host}" on host
  // R + 1 of the test bed. It must exec the rank in place (the launcher watches that pid).
  std::vector<std::string> rank_prefix;
  std::vector<std::string> env = {"OPENBLAS_NUM_THREADS=1"};  // added to the environment
  std::chrono::seconds grace{10};  // after a failure, before the remaining ranks are killed
  std::function<void(int rank, const std::string& line)> on_report;
  std::function<void(int rank, pid_t pid)> on_start;
};

struct LaunchResult {
  bool ok = true;
  std::string failure;          // "rank 2 was killed by signal 9 (Killed)"
  std::vector<int> exit_codes;  // per rank; 128+N for a signal
};

StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options);

}  // namespace pw
