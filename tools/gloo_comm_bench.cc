#include "tools/gloo_comm_bench.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include "executor/comm/gloo_comm.h"
#include "executor/comm/kv_store.h"
#include "executor/cpu/caught_spins.h"
#include "executor/launcher.h"
#include "executor/process_resources.h"
#include "executor/rank_runner.h"
#include "ir/proto_io.h"
#include "ir/rank_layout.h"
#include "ops/kernel.h"
#include "tools/cluster_env.h"
#include "tools/comm_bench_report.h"
#include "tools/comm_recorder.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace pw::tools {
namespace {

double ProcessCpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// ---- One rank process ----

// Trains the plan for --steps steps; reports the operations of every step after the first,
// those steps' times, the waits its threads caught spinning in them, then "c CPU_SECONDS
// STEPS" (the process's CPU time over them).
StatusOr<int> RunCommBench(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name : {"steps", "rank", "world-size", "store", "report-fd"}) flags.Value(name);
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one planned module file, got ", flags.positional().size());
  PW_ASSIGN_OR_RETURN(int64_t steps, flags.GetInt("steps", 4));
  PW_ASSIGN_OR_RETURN(int64_t rank, flags.RequireInt("rank"));
  PW_ASSIGN_OR_RETURN(int64_t fd, flags.RequireInt("report-fd"));
  PW_ASSIGN_OR_RETURN(std::string store_spec, flags.Require("store"));
  if (steps < 2) return InvalidArgument("flag --steps must be >= 2, got ", steps);
  // The process as a rank process sets it up (before any thread starts): an allocator
  // that keeps freed tensors, and one kernel thread.
  KeepFreedMemory();
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(flags.positional()[0]));
  ops::SetKernelThreads(1);  // as rank processes run
  PW_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> store, OpenStore(store_spec));
  GlooOptions gloo;
  gloo.timeout = std::chrono::seconds(120);
  // A rank on another host listens where the others can reach it: on its route's address
  // toward the store's host (a file store: this machine, loopback).
  if (const std::string host = StoreHost(store_spec); !host.empty()) {
    PW_ASSIGN_OR_RETURN(gloo.hostname, LocalAddressToward(host));
  }
  PW_ASSIGN_OR_RETURN(std::unique_ptr<CommFactory> factory,
                      MakeGlooCommFactory(*store, module.mesh, static_cast<int>(rank), gloo));
  CommRecorder recorder;
  TimedCommFactory timed(*factory, recorder);
  RankRunOptions run;
  run.rank = static_cast<int>(rank);
  run.steps = steps;
  run.data.data_seed = static_cast<uint64_t>(module.metadata.GetInt("seed", 1));
  double cpu0 = 0, cpu1 = 0;
  std::vector<double> step_seconds;
  run.on_step = [&](const RankStepReport& r) {
    if (r.step == 0) {
      cpu0 = ProcessCpu();
      recorder.Start();
      cpu::CountCaughtSpins(true);
    } else {
      step_seconds.push_back(r.step_ms * 1e-3);
    }
    cpu1 = ProcessCpu();
  };
  PW_RETURN_IF_ERROR(RunRank(module, &timed, run));
  const std::string out = recorder.Report(cpu1 - cpu0, step_seconds, cpu::CaughtSpinsSoFar());
  for (size_t done = 0; done < out.size();) {
    ssize_t n = write(static_cast<int>(fd), out.data() + done, out.size() - done);
    if (n <= 0) return Internal("cannot write the report");
    done += static_cast<size_t>(n);
  }
  return 0;
}

// ---- The launching side ----

class GlooCommBenchmark final : public cost::CommBenchmark {
 public:
  explicit GlooCommBenchmark(CommBenchPlacement placement) : placement_(std::move(placement)) {}

  StatusOr<cost::CommRunResult> Run(const Module& plan, int steps) override {
    char pattern[] = "/tmp/pw-commbench-XXXXXX";
    if (!mkdtemp(pattern)) return Unavailable("cannot create a temporary directory for the run");
    const std::string dir = pattern;
    StatusOr<cost::CommRunResult> result = RunIn(dir, plan, steps);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    return result;
  }

 private:
  StatusOr<cost::CommRunResult> RunIn(const std::string& dir, const Module& plan, int steps) {
    const std::string module_file = (std::filesystem::path(dir) / "module.pb").string();
    PW_RETURN_IF_ERROR(SaveModule(plan, module_file));
    const int n = plan.mesh.world_size();
    LaunchOptions launch;
    launch.nproc = n;
    launch.run_dir = dir;
    launch.args = {"comm-bench", module_file, "--steps", std::to_string(steps)};
    launch.rank_prefix = placement_.rank_prefix;
    if (!placement_.store.empty())
      launch.store = StrCat(placement_.store, "/commbench-", getpid(), "-", ++runs);
    std::vector<std::vector<std::string>> lines(n);
    launch.on_report = [&](int rank, const std::string& line) { lines[rank].push_back(line); };
    PW_ASSIGN_OR_RETURN(LaunchResult launched, LaunchRanks(launch));
    if (!launched.ok) return Unavailable("the measuring run failed: ", launched.failure);
    return PairCommReports(plan.mesh, lines);
  }

  CommBenchPlacement placement_;
  // Numbers this process's runs (over every benchmark it makes): each run meets under a
  // key prefix of its own, never one holding an earlier run's ring addresses.
  static inline std::atomic<int> runs{0};
};

}  // namespace

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark(CommBenchPlacement placement) {
  return std::make_unique<GlooCommBenchmark>(std::move(placement));
}

PW_REGISTER_COMMAND(comm_bench, "comm-bench",
                    "(internal) one rank of 'pipeweave profile --comm''s measuring run",
                    "pipeweave comm-bench PLAN --steps N --rank R --world-size N --store DIR "
                    "--report-fd FD\n"
                    "Started by 'pipeweave profile --comm' through the launcher, once per rank: "
                    "trains PLAN\nand reports the time of every communication after the first "
                    "step.",
                    RunCommBench, /*internal=*/true);

}  // namespace pw::tools
