#include "tools/gloo_comm_bench.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "executor/comm/gloo_comm.h"
#include "executor/comm/kv_store.h"
#include "executor/launcher.h"
#include "executor/process_resources.h"
#include "executor/rank_runner.h"
#include "ir/proto_io.h"
#include "ir/rank_layout.h"
#include "ops/kernel.h"
#include "tools/cluster_env.h"
#include "tools/comm_bench_report.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace pw::tools {
namespace {

// One clock for every process of the machine, so that ranks' times compare.
double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double ProcessCpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string Fmt(double t) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9f", t);
  return buf;
}

// ---- One rank process ----

// What the rank's communications did once measuring started, as report lines
// (tools/comm_bench_report.h has their format).
class Recorder {
 public:
  void Start() { measuring_ = true; }
  bool measuring() const { return measuring_.load(std::memory_order_relaxed); }
  void Add(std::string line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
  }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::atomic<bool> measuring_{false};
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// A stream's communicator with a clock around every operation.
class TimedComm final : public StreamComm {
 public:
  TimedComm(std::unique_ptr<StreamComm> inner, StreamType stream, Recorder& recorder)
      : inner_(std::move(inner)), stream_(stream), recorder_(recorder) {}

  Status AllReduceSum(std::string_view group, float* data, int64_t count) override {
    return Timed('a', group, count * 4, [&] { return inner_->AllReduceSum(group, data, count); });
  }
  Status AllReduceSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                  int64_t count) override {
    return Timed('a', group, count * DataTypeSize(dtype),
                 [&] { return inner_->AllReduceSumLowPrecision(group, dtype, data, count); });
  }
  Status ReduceScatterSum(std::string_view group, float* data, int64_t count) override {
    return Timed('x', group, count * 4,
                 [&] { return inner_->ReduceScatterSum(group, data, count); });
  }
  Status ReduceScatterSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                      int64_t count) override {
    return Timed('x', group, count * DataTypeSize(dtype),
                 [&] { return inner_->ReduceScatterSumLowPrecision(group, dtype, data, count); });
  }
  Status AllGather(std::string_view group, void* data, int64_t bytes) override {
    return Timed('g', group, bytes, [&] { return inner_->AllGather(group, data, bytes); });
  }
  Status Shift(std::string_view group, int offset, const void* send, void* recv,
               int64_t bytes) override {
    return inner_->Shift(group, offset, send, recv, bytes);
  }
  Status AllReduceMax(std::string_view group, float* data, int64_t count) override {
    return inner_->AllReduceMax(group, data, count);
  }
  int GroupRank(std::string_view group) const override { return inner_->GroupRank(group); }
  int GroupSize(std::string_view group) const override { return inner_->GroupSize(group); }
  Status Send(int peer, uint64_t tag, const Tensor& tensor) override {
    const double posted = Now();
    Status s = inner_->Send(peer, tag, tensor);
    if (recorder_.measuring())
      recorder_.Add(StrCat("s ", peer, " ", tag, " ", tensor.nbytes(), " ", Fmt(posted)));
    return s;
  }
  Status Recv(int peer, uint64_t tag, Tensor& tensor) override {
    const double posted = Now();
    Status s = inner_->Recv(peer, tag, tensor);
    const double done = Now();
    if (recorder_.measuring())
      recorder_.Add(
          StrCat("r ", peer, " ", tag, " ", tensor.nbytes(), " ", Fmt(posted), " ", Fmt(done)));
    return s;
  }
  Status Flush() override { return inner_->Flush(); }
  // Connections made before the first step, as in a run.
  Status ExpectCollective(std::string_view group) override {
    return inner_->ExpectCollective(group);
  }
  Status ExpectTransfer(int peer, bool send, uint64_t tag, const std::string& where) override {
    return inner_->ExpectTransfer(peer, send, tag, where);
  }
  Status Connect() override { return inner_->Connect(); }

 private:
  // Runs a collective of `kind` ('a', 'g', 'x') over `group`, recording it once measuring.
  template <typename Fn>
  Status Timed(char kind, std::string_view group, int64_t bytes, Fn run) {
    const int64_t seq = sequence_[StrCat(std::string(1, kind), group)]++;
    const double arrived = Now();
    Status s = run();
    const double done = Now();
    if (recorder_.measuring())
      recorder_.Add(StrCat(std::string(1, kind), " ", StreamTypeName(stream_), " ", group, " ", seq,
                           " ", bytes, " ", Fmt(arrived), " ", Fmt(done)));
    return s;
  }

  std::unique_ptr<StreamComm> inner_;
  StreamType stream_;
  Recorder& recorder_;
  std::map<std::string, int64_t> sequence_;
};

class TimedFactory final : public CommFactory {
 public:
  TimedFactory(CommFactory& inner, Recorder& recorder) : inner_(inner), recorder_(recorder) {}
  StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) override {
    PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> comm, inner_.Create(stream));
    return std::unique_ptr<StreamComm>(
        std::make_unique<TimedComm>(std::move(comm), stream, recorder_));
  }

 private:
  CommFactory& inner_;
  Recorder& recorder_;
};

// Trains the plan for --steps steps; reports the operations of every step after the first,
// then "c CPU_SECONDS STEPS" (the process's CPU time over those steps).
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
  Recorder recorder;
  TimedFactory timed(*factory, recorder);
  RankRunOptions run;
  run.rank = static_cast<int>(rank);
  run.steps = steps;
  run.data.data_seed = static_cast<uint64_t>(module.metadata.GetInt("seed", 1));
  double cpu0 = 0, cpu1 = 0;
  run.on_step = [&](const RankStepReport& r) {
    if (r.step == 0) {
      cpu0 = ProcessCpu();
      recorder.Start();
    }
    cpu1 = ProcessCpu();
  };
  PW_RETURN_IF_ERROR(RunRank(module, &timed, run));
  std::string out;
  for (const std::string& line : recorder.lines()) out += line + "\n";
  out += StrCat("c ", Fmt(cpu1 - cpu0), " ", steps - 1, "\n");
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
