// Whole-process start-up of the commands that neither train nor profile: each command is
// spawned RUNS times (output discarded) and its wall-clock median and minimum printed.
// Timed from here, not from a shell, so that a shell's own fork and exec are not counted.
//
//   startup_time PIPEWEAVE MODULE [--runs N] [--before OLD_PIPEWEAVE] [--max-ms MS]
//
// MODULE is the module `inspect` reads (benchmarks/startup.sh builds the demo GPT). With
// --before, each run of a command alternates with one of OLD_PIPEWEAVE, and the ratio of the
// medians is printed: both see the same load. With --max-ms, exits 1 when a median is over.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

// Wall milliseconds of one run of `argv`, or a negative number when it failed.
double RunOnce(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ms : -1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "startup_time: %s\nusage: startup_time PIPEWEAVE MODULE [--runs N] "
               "[--before OLD_PIPEWEAVE] [--max-ms MS]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) Usage("needs the tool and a module");
  const std::string tool = argv[1], module = argv[2];
  std::string before;
  int runs = 21;
  double max_ms = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(("missing the value of " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--runs") {
      runs = std::atoi(value);
      if (runs < 1) Usage("--runs must be a positive number");
    } else if (flag == "--before") {
      before = value;
    } else if (flag == "--max-ms") {
      max_ms = std::atof(value);
      if (max_ms <= 0) Usage("--max-ms must be a positive number of milliseconds");
    } else {
      Usage(("unknown flag " + flag).c_str());
    }
  }
  const std::vector<std::vector<std::string>> commands = {
      {"schedule", "--help"}, {"opt", "--list-passes"}, {"inspect", module}};
  bool over = false;
  for (const auto& command : commands) {
    std::string name;
    for (const std::string& word : command) name += (name.empty() ? "" : " ") + word;
    std::vector<double> now, old;
    for (int r = 0; r < runs; ++r) {
      std::vector<std::string> args = {tool};
      args.insert(args.end(), command.begin(), command.end());
      const double ms = RunOnce(args);
      if (ms < 0) {
        std::fprintf(stderr, "startup_time: '%s %s' failed; run it by hand to see why\n",
                     tool.c_str(), name.c_str());
        return 1;
      }
      now.push_back(ms);
      if (!before.empty()) {
        args[0] = before;
        const double old_ms = RunOnce(args);
        if (old_ms < 0) {
          std::fprintf(stderr, "startup_time: '%s %s' failed\n", before.c_str(), name.c_str());
          return 1;
        }
        old.push_back(old_ms);
      }
    }
    const double median = Median(now);
    std::printf("%-40s median %7.2f ms  min %7.2f ms", name.c_str(), median,
                *std::min_element(now.begin(), now.end()));
    if (!before.empty()) {
      const double old_median = Median(old);
      std::printf("  before: median %7.2f ms  min %7.2f ms  after/before %.2fx", old_median,
                  *std::min_element(old.begin(), old.end()), median / old_median);
    }
    std::printf("  (%d runs)\n", runs);
    if (max_ms > 0 && median > max_ms) {
      std::printf("  over the %.1f ms limit\n", max_ms);
      over = true;
    }
  }
  return over ? 1 : 0;
}
