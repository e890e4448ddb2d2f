// `pipeweave ab-rank LOG_DIR LABEL run-parallel ...`: one rank process of a `pipeweave ab
// --run` round. It sends its stdout and stderr to LOG_DIR/rankR.log (so that the A/B's
// own stderr keeps to one line on failure, naming the rank) and runs run-parallel's rank.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tools/command.h"
#include "tools/run_parallel.h"

namespace pw::tools {
namespace {

constexpr const char* kUsage =
    "pipeweave ab-rank LOG_DIR LABEL run-parallel FILE [run-parallel rank flags]\n"
    "Started by 'pipeweave ab --run' for every rank of a round (LABEL: plan and round, as\n"
    "B:2): runs the rank with its output in LOG_DIR/rankR.log. For tests of the A/B's error\n"
    "paths, PW_AB_FAULT=die:LABEL:R kills rank R of that round at its start and\n"
    "PW_AB_FAULT=hang:LABEL:R makes it hang.";

// The value after `--rank`, or -1.
int RankOf(const std::vector<std::string>& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--rank") return std::atoi(args[i + 1].c_str());
  return -1;
}

// A fault a test asked for this rank of this round (PW_AB_FAULT).
void InjectFault(const std::string& label, int rank) {
  const char* fault = std::getenv("PW_AB_FAULT");
  if (fault == nullptr) return;
  const std::string spec = fault, target = StrCat(":", label, ":", rank);
  if (spec == "die" + target) raise(SIGKILL);
  if (spec == "hang" + target)
    for (;;) pause();
}

StatusOr<int> RunAbRank(const std::vector<std::string>& args) {
  if (args.size() < 4 || args[2] != "run-parallel")
    return InvalidArgument("expected LOG_DIR LABEL run-parallel FILE ...");
  const int rank = RankOf(args);
  const std::string log = StrCat(args[0], "/rank", rank, ".log");
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot open ", log);
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  close(fd);
  InjectFault(args[1], rank);
  return RunParallel(std::vector<std::string>(args.begin() + 3, args.end()));
}

}  // namespace

PW_REGISTER_COMMAND(ab_rank, "ab-rank", "one rank process of 'pipeweave ab --run'", kUsage,
                    RunAbRank, /*internal=*/true, /*trains=*/true);

}  // namespace pw::tools
