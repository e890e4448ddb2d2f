// `pipeweave profile FILE... -o costs.pbtxt`: measures every distinct op signature of the
// modules on this machine's CPU kernels (and, with --comm, all-reduce and send/recv between
// rank processes) into an empirical cost table for `pipeweave sim`.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "cost_model/comm_profiler.h"
#include "cost_model/profiler.h"
#include "cost_model/stale_price.h"
#include "executor/sequential_plan.h"
#include "ir/proto_io.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "simulator/comm_sizes.h"
#include "simulator/sim_graph.h"
#include "simulator/simulator.h"
#include "simulator/turn_straggle.h"
#include "tools/command.h"
#include "tools/cuda_kernel_timer.h"
#include "tools/flags.h"
#include "tools/gloo_comm_bench.h"
#include "tools/in_run_costs.h"
#include "tools/in_run_rounds.h"
#include "tools/module_validation.h"
#include "tools/output_files.h"
#include "tools/profiled_threads.h"
#include "tools/progress_bar.h"
#include "tools/runtime_calibration.h"
#include "tools/transfer_cpu.h"

namespace pw::tools {
namespace {

// How far behind its last member came, on compute streams and on communication streams.
std::string StragglesText(const cost::CommFit& f) {
  char buf[160] = "";
  if (f.has_straggle() && f.has_comm_stream_straggle())
    std::snprintf(buf, sizeof buf, ", last member %.1f us behind (%.1f on communication streams)",
                  f.straggle() * 1e6, f.comm_stream_straggle() * 1e6);
  else if (f.has_straggle() || f.has_comm_stream_straggle())
    std::snprintf(buf, sizeof buf, ", last member %.1f us behind%s",
                  (f.has_straggle() ? f.straggle() : f.comm_stream_straggle()) * 1e6,
                  f.has_straggle() ? "" : " (on communication streams)");
  return buf;
}

constexpr const char* kUsage =
    "pipeweave profile FILE [FILE...] -o COSTS [--repeat N (20)] [--warmup N (3)]\n"
    "           [--threads N] [--pipeline PASSES] [--merge] [--comm]\n"
    "           [--comm-steps N (6)] [--comm-runs N (2)]\n"
    "           [--store redis://HOST:PORT --rank-prefix 'CMD {host}']\n"
    "           [--cache auto|hot|l3|dram] [--no-calibrate] [--backend cpu|cuda] [--gpu N (0)]\n"
    "           [--in-run [--in-run-steps N (6)] [--micro-batches M (4)]]\n"
    "Runs every distinct (op type, input shapes, dtype, attributes) of the modules on the\n"
    "CPU kernels, warm-up then N repetitions (more for tiny ops), and writes the median and\n"
    "spread of each to COSTS (.pbtxt text or .pb binary), with this CPU's measured peak GEMM\n"
    "rate and memory bandwidth. A forward-only module gets 'append-backward' first, so its\n"
    "backward and optimizer ops are measured too. Ops run on the kernel threads the run to\n"
    "predict gives each process: --threads N, else what 'pipeweave run' picks for the\n"
    "modules' processes (a planned module: one per rank; an unplanned one: the reference\n"
    "runner's one) on this machine; sim refuses a table profiled at another count.\n"
    "(--blas-threads is the old name of --threads.)\n"
    "Before every timed run the caches are put in the state a step leaves them in: the op's\n"
    "activations just written, its weights in L3 when a rank's parameters fit in it, else in\n"
    "memory (--cache auto; or force one).\n"
    "It also calibrates the per-op overhead of the executor and of the reference runner on\n"
    "a tiny GPT (with --in-run, the reference's on the first unplanned module itself: its\n"
    "steps against the executor's, since what it adds grows with the ops), and the CPU a\n"
    "stream's thread costs per wait for another stream's event on busy cores\n"
    "(--no-calibrate skips these, and the transfer probe below). --merge folds the\n"
    "results into an existing COSTS (repeat-weighted).\n"
    "--comm also measures the communication of every module that has more than one rank:\n"
    "its plan trains for --comm-steps steps (6) on as many rank processes (CPU streams over\n"
    "TCP, as pipeweave run starts them) with a clock around every all-reduce, send and recv,\n"
    "--comm-runs times (2; up to 2 more until another run comes within 1.1x of the fastest\n"
    "and the fastest within 1.1x of the longest step the simulation reaches), keeping the\n"
    "median of the runs within 1.1x of the fastest (a slow spell of the machine only slows\n"
    "a run);\n"
    "the table gets per kind and group size the samples at the sizes it moved (printed: the\n"
    "median and mean at each size), an alpha-beta fit and its residual, the CPU each\n"
    "operation cost its rank and how far the last member of a group arrived behind the\n"
    "others. Where a plan sends between pipeline stages, it then measures the compute one\n"
    "transfer takes from busy cores: a busy thread per core losing work while two threads\n"
    "pass messages over the executor's TCP link (sim charges it where the threads run, in\n"
    "place of the transfers' share of the run's CPU). Where the ranks outnumber the cores,\n"
    "it fits the share of its measured straggle a collective on a compute stream waits for\n"
    "(sim shares the cores evenly, which stands for most of the ranks' turns): the share\n"
    "whose simulated steps of the measuring runs come nearest what they measured. With\n"
    "--store and --rank-prefix (as 'pipeweave ab' takes them) the measuring run's ranks start\n"
    "on other hosts (e.g. the test bed of scripts/netns_cluster.sh) and meet in that Redis\n"
    "store, so the link between them is what gets measured.\n"
    "--in-run times the ops inside a training run instead of one at a time: the module's\n"
    "plan (without one: its sequential plan of M micro-batches) trains N steps, its ranks as\n"
    "threads of this process, in up to three runs spread through the profile (each after an\n"
    "untimed step: the machine's speed moves over seconds; plans of several schedules take\n"
    "turns in runs of ~3 steps), and every kernel instruction is\n"
    "timed where it runs, after the op that ran before it (with 1 kernel thread: the CPU\n"
    "time of its stream's thread, so ranks sharing the cores do not inflate it). Caches,\n"
    "allocator and kernel threads are then as a step leaves them, which an op timed alone\n"
    "misses most for small ops. Signatures the run does not execute are timed alone.\n"
    "The order of a rank's jobs moves what its ops cost (fthenb's backward reads each\n"
    "activation long after writing it): modules whose plans have different schedules get,\n"
    "besides the entries of all runs pooled, each schedule's own, with which sim and ab price\n"
    "a plan of that schedule. Beside each in-run entry goes what its runs found beyond a cache\n"
    "(reads, and writes into memory gone cold); over the runs of several schedules profile\n"
    "fits the cache (from a core's L2 doubling up to the L3) whose counts follow the\n"
    "signatures' cost changes and the price of a byte there, with which sim, ab and tune\n"
    "price the order of any plan, those of schedules the table did not run included.\n"
    "--backend cuda times the CUDA kernels on GPU N instead (device time between CUDA events\n"
    "around the output allocation and the kernel, as the CUDA backend runs them), with the\n"
    "GPU's peak GEMM rates and memory bandwidth measured; the table is for the built-in\n"
    "device the GPU is (h100, a100), so `sim --device h100 --costs COSTS` uses it.";

// The communication of `module`, from a short run of it; what its ranks spend beyond the
// compute the op costs just measured price, and beyond its streams' waits for each other
// (DeviceSpec.wait_cpu each, as many as the simulated step has), is charged to
// communication.
StatusOr<cost::CommProfile> MeasureComm(const Module& module, const cost::OpCostTable& table,
                                        int steps, const CommBenchPlacement& placement) {
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      cost::Estimator::Create(table.proto().device_spec(), table));
  PW_ASSIGN_OR_RETURN(cost::SimGraph graph,
                      cost::BuildSimGraph(module, *estimator, ops::Registry()));
  cost::CommSizes sizes = cost::CommSizesOf(graph, estimator->device().op_overhead());
  cost::SimOptions sim_options;
  sim_options.record_timeline = false;
  sim_options.compute_threads = std::max(1, table.proto().blas_threads());
  PW_ASSIGN_OR_RETURN(cost::SimResult step,
                      cost::Simulate(graph, estimator->device(), sim_options, &estimator->comm()));
  cost::CommProfileOptions options;
  options.steps = steps;
  options.compute_seconds =
      sizes.compute_seconds + step.stream_waits * estimator->device().wait_cpu();
  options.compute_gap = sizes.compute_gap;
  std::unique_ptr<cost::CommBenchmark> bench = MakeGlooCommBenchmark(placement);
  return cost::ProfileComm(*bench, module, options);
}

// DeviceSpec.spin_cpu_share from the measuring runs: their waits caught spinning pooled.
struct CaughtWaits {
  CaughtSpins spins;
  double steps = 0;
  void Add(const cost::CommProfile& run, int64_t measured_steps) {
    spins.Add(run.caught);
    steps += static_cast<double>(measured_steps);
  }
  // Into `spec`; runs that caught none leave it as is (false).
  bool Apply(cost::DeviceSpec& spec) const {
    if (spins.shared_waits == 0 || spins.shared_seconds <= 0) return false;
    spec.set_spin_cpu_share(std::clamp(spins.CoreShare(), 0.0, 1.0));
    return true;
  }
  // The same, with a line saying what it rests on.
  void Record(cost::DeviceSpec& spec) const {
    if (!Apply(spec)) {
      std::fprintf(stderr,
                   "a thread spinning for an event on busy cores: no wait caught spinning on a "
                   "shared core in the measuring run (%.3f of a core, as the spec had it)\n",
                   spec.spin_cpu_share());
      return;
    }
    const double n = static_cast<double>(spins.shared_waits);
    std::fprintf(stderr,
                 "a thread spinning for an event on busy cores: %.3f of a core (%.0f waits a "
                 "measured step caught their event spinning on a shared core, %.1f us of spin "
                 "and %.1f us of CPU each; %.0f %% of the caught waits kept a core to "
                 "themselves)\n",
                 spec.spin_cpu_share(), n / steps, spins.shared_seconds / n * 1e6,
                 spins.shared_cpu_seconds / n * 1e6,
                 100.0 * static_cast<double>(spins.waits - spins.shared_waits) /
                     static_cast<double>(spins.waits));
  }
};

// DeviceSpec.turn_straggle from the measuring runs' steps (simulator/turn_straggle.h), with
// the table as measured so far; one line saying what it is and what it rests on.
Status FitTurns(const std::vector<cost::MeasuredStep>& runs, cost::OpCostTable& table) {
  PW_ASSIGN_OR_RETURN(cost::TurnStraggleFit fit,
                      cost::FitTurnStraggle(runs, table, ops::Registry()));
  if (!fit.fitted) return OkStatus();
  table.mutable_proto().mutable_device_spec()->set_turn_straggle(fit.share);
  std::fprintf(stderr,
               "ranks taking turns on shared cores: a collective on a compute stream waits %.2f "
               "of its measured straggle (the measuring run%s step%s: %.3f ms measured, "
               "simulated %.3f ms with none of it, %.3f ms with all, %.3f ms with %.2f)\n",
               fit.share, fit.plans > 1 ? "s'" : "'s", fit.plans > 1 ? "s summed" : "",
               fit.measured * 1e3, fit.without * 1e3, fit.with_all * 1e3, fit.with_share * 1e3,
               fit.share);
  if (std::string note = SlowMeasuringRunNote(fit.measured, fit.with_all); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  return OkStatus();
}

// How far the measuring `run` of `module` stepped beyond the longest step the turn fit can
// simulate for it (FitTurnStraggle with all of the straggle), priced with `table` and the
// waits `caught` so far, each with the run's own added: over kBeyondReach, the run met a
// slower machine than the ops were timed on, or the plan spends time the model does not see.
// 0 where the plan's step does not depend on the turns.
StatusOr<double> BeyondFit(const Module& module, const cost::CommProfile& run,
                           cost::OpCostTable table, CaughtWaits caught, int64_t measured_steps) {
  for (const cost::CommFit& f : run.fits) table.MergeComm(f);
  caught.Add(run, measured_steps);
  caught.Apply(*table.mutable_proto().mutable_device_spec());
  PW_ASSIGN_OR_RETURN(cost::TurnStraggleFit fit,
                      cost::FitTurnStraggle({{&module, run.step_seconds}}, table, ops::Registry()));
  return fit.fitted && fit.with_all > 0 ? fit.measured / fit.with_all : 0.0;
}

// Records beside each in-run entry what its runs found beyond the cache the fit chooses (a
// core's L2 when there is one schedule), and the price of a byte there where the runs of
// several schedules tell it.
void RecordStaleBytes(const cost::StaleCounts& stale, const std::set<std::string>& in_run_keys,
                      cost::OpCostTable& table) {
  const cost::StaleFit fit = cost::FitStalePrice(table, stale);
  const auto& capacities = stale.capacities();
  const size_t c =
      std::find(capacities.begin(), capacities.end(), fit.capacity) - capacities.begin();
  for (cost::OpCostEntry& e : *table.mutable_proto().mutable_entries()) {
    if (!in_run_keys.count(e.key())) continue;  // timed alone, its caches set up
    if (std::optional<double> mean = stale.Mean(c, e.schedule(), e.key())) e.set_stale_bytes(*mean);
  }
  table.mutable_proto().set_stale_capacity(fit.capacity);
  if (fit.fitted) table.mutable_proto().set_stale_price(fit.price);
  if (!fit.orders.empty()) std::fprintf(stderr, "%s\n", fit.Describe().c_str());
}

StatusOr<int> RunProfile(const std::vector<std::string>& args) {
  Flags flags;
  flags.Value("output").Alias("o", "output");
  for (const char* name :
       {"repeat", "warmup", "threads", "pipeline", "cache", "comm-steps", "backend", "gpu", "store",
        "rank-prefix", "in-run-steps", "micro-batches", "comm-runs"})
    flags.Value(name);
  flags.Alias("blas-threads", "threads");
  flags.Switch("merge").Switch("comm").Switch("no-calibrate").Switch("in-run");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().empty()) return InvalidArgument("expected at least one module file");
  PW_ASSIGN_OR_RETURN(std::string output, flags.Require("output"));
  cost::ProfileOptions options;
  // Counts far above what a measurement needs are refused: they would run for days.
  constexpr int64_t kMaxRuns = 1000000;
  PW_ASSIGN_OR_RETURN(int64_t repeats, flags.GetInt("repeat", 20, 1, kMaxRuns));
  PW_ASSIGN_OR_RETURN(int64_t warmup, flags.GetInt("warmup", 3, 0, kMaxRuns));
  PW_ASSIGN_OR_RETURN(int64_t requested_threads, flags.GetInt("threads", 0, 1, 4096));
  PW_ASSIGN_OR_RETURN(int64_t comm_steps, flags.GetInt("comm-steps", 6, 2, kMaxRuns));
  PW_ASSIGN_OR_RETURN(int64_t comm_runs, flags.GetInt("comm-runs", 2, 1, 100));
  PW_ASSIGN_OR_RETURN(int64_t in_run_steps, flags.GetInt("in-run-steps", 6, 1, kMaxRuns));
  PW_ASSIGN_OR_RETURN(int64_t micro_batches, flags.GetInt("micro-batches", 4, 1, kMaxRuns));
  const bool in_run = flags.Has("in-run");
  if (!in_run && (flags.Has("in-run-steps") || flags.Has("micro-batches")))
    return InvalidArgument("--in-run-steps and --micro-batches are for --in-run");
  options.repeats = static_cast<int>(repeats);
  options.warmup = static_cast<int>(warmup);
  const std::string backend = flags.Get("backend", "cpu");
  if (backend != "cpu" && backend != "cuda")
    return InvalidArgument("--backend ", backend, ": expected cpu or cuda");
  const bool on_gpu = backend == "cuda";
  if (on_gpu)
    for (const char* cpu_only : {"threads", "cache", "comm", "in-run"})
      if (flags.Has(cpu_only))
        return InvalidArgument("--", cpu_only, " is for CPU profiles; drop it with --backend cuda");
  if (!on_gpu && flags.Has("gpu")) return InvalidArgument("--gpu needs --backend cuda");
  // Where the measuring run's ranks start: this machine, or other hosts meeting in a Redis
  // store (the link between them is then what gets measured).
  CommBenchPlacement placement;
  placement.store = flags.Get("store");
  std::istringstream prefix(flags.Get("rank-prefix"));  // words split at spaces
  for (std::string word; prefix >> word;) placement.rank_prefix.push_back(word);
  if (flags.Has("comm-runs") && !flags.Has("comm"))
    return InvalidArgument("--comm-runs counts the measuring runs of --comm: add --comm");
  if ((!placement.store.empty() || !placement.rank_prefix.empty()) && !flags.Has("comm"))
    return InvalidArgument("--store and --rank-prefix place the ranks of --comm's run: add --comm");
  if (!placement.store.empty() && placement.store.rfind("redis://", 0) != 0)
    return InvalidArgument("flag --store: expected a redis server (redis://HOST:PORT), got '",
                           placement.store, "'");
  if (!placement.rank_prefix.empty() && placement.store.empty())
    return InvalidArgument("--rank-prefix starts ranks elsewhere: give them a store they can ",
                           "reach with --store redis://HOST:PORT");
  PW_ASSIGN_OR_RETURN(int64_t gpu, flags.GetInt("gpu", 0, 0, 1023));

  // Everything that can fail without measuring fails first: the output's format, the
  // table to merge into, the modules and their plans.
  PW_RETURN_IF_ERROR(FormatFromPath(output).status());
  // --merge rewrites the output table in place; no module may be overwritten.
  OutputFiles outputs(flags.positional());
  PW_RETURN_IF_ERROR(outputs.Declare("-o", output));
  // The GPU is found (or refused) before anything is read or measured.
  cost::KernelTimer timer;
  if (on_gpu) {
    PW_ASSIGN_OR_RETURN(timer, CudaKernelTimer(static_cast<int>(gpu)));
    options.timer = &timer;
  }
  const std::string device = on_gpu ? timer.spec.name() : "cpu";
  cost::OpCostTable merged;
  const bool merge = flags.Has("merge") && std::filesystem::exists(output);
  if (merge) {
    PW_ASSIGN_OR_RETURN(merged, cost::OpCostTable::Load(output));
    if (!merged.device().empty() && merged.device() != device)
      return InvalidArgument(output, ": cannot merge measurements of device '", device,
                             "' into a table of device '", merged.device(), "'");
  }

  const std::string cache = flags.Get("cache", "auto");
  if (cache != "auto") {
    PW_ASSIGN_OR_RETURN(options.cache, cost::ParseCacheState(cache));
  }
  const cost::CacheSizes cache_sizes = cost::ReadCacheSizes();
  int64_t parameter_bytes = 0;

  std::vector<cost::CostedOp> ops;
  std::set<std::string> seen;
  std::vector<std::pair<std::string, int>> process_counts;  // per module
  std::vector<Module> communicating;  // modules with more than one rank, for --comm
  std::vector<Module> to_run;         // --in-run
  std::vector<std::string> to_run_paths;
  // What the ops timed in the runs find beyond each cache from a core's L2 to the L3 there.
  cost::StaleCounts stale(cost::StaleCounts::Candidates(cache_sizes.l2, cache_sizes.l3));
  for (const std::string& path : flags.positional()) {
    PW_ASSIGN_OR_RETURN(Module module, LoadTrainingModule(path, flags.Get("pipeline")));
    PW_RETURN_IF_ERROR(ValidateModule(module).WithContext(path));
    StatusOr<std::vector<cost::CostedOp>> distinct = cost::DistinctOps(module, ops::Registry());
    if (!distinct.ok()) return distinct.status().WithContext(path);
    for (cost::CostedOp& c : *distinct)
      if (seen.insert(c.sig.key).second) ops.push_back(std::move(c));
    parameter_bytes = std::max(parameter_bytes, cost::RankParameterBytes(module));
    process_counts.emplace_back(path, module.plan.empty() ? 1 : module.mesh.world_size());
    if (in_run) {
      Status counted = CountInRunStaleBytes(module, static_cast<int>(micro_batches), stale);
      if (!counted.ok()) return counted.WithContext(path);
      to_run.push_back(module);
      to_run_paths.push_back(path);
    }
    if (!flags.Has("comm") || module.mesh.world_size() == 1) continue;
    if (module.plan.empty()) {
      StatusOr<Module> planned = WithSequentialPlan(module, 1);
      if (!planned.ok()) return planned.status().WithContext(path);
      module = std::move(planned).value();
    }
    // Lowered once here, so that a plan the simulator refuses fails before measuring.
    PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> roofline, MakeEstimator("cpu", ""));
    StatusOr<cost::SimGraph> graph = cost::BuildSimGraph(module, *roofline, ops::Registry());
    if (!graph.ok()) return graph.status().WithContext(path);
    communicating.push_back(std::move(module));
  }

  // The kernel threads of the run to predict: each module's processes must agree.
  int processes = 0;
  for (const auto& [path, count] : process_counts) {
    if (processes && count != processes && requested_threads == 0)
      return InvalidArgument("the modules run on ", processes, " and ", count,
                             " processes: profile them separately or give --threads");
    processes = count;
  }
  options.blas_threads = RunThreads(static_cast<int>(requested_threads), std::max(processes, 1));
  if (merge && merged.proto().blas_threads() &&
      merged.proto().blas_threads() != options.blas_threads)
    return InvalidArgument(output, ": measured with ", merged.proto().blas_threads(),
                           " kernel threads, cannot merge measurements with ", options.blas_threads,
                           " (give --threads ", merged.proto().blas_threads(), ")");
  if (cache == "auto") options.cache = cost::CacheStateFor(parameter_bytes, cache_sizes);
  auto start = std::chrono::steady_clock::now();
  ProgressBar bar("profiling");
  options.progress = [&](size_t done, size_t total, const std::string& key) {
    bar.Update(done, total, key);
  };
  // --in-run: the signatures the runs execute are timed there, the rest alone. The steps
  // are split over runs spread through the profile (before the ops timed alone, after them,
  // after the calibration, the rest at the end): this machine's speed moves over seconds,
  // and one run of a few steps meets one moment of it. Plans of several schedules take
  // turns in runs of ~3 steps, so that what sets their schedules' costs apart is their order
  // and not the moment each ran at.
  std::set<std::string> schedules;
  for (const Module& module : to_run) schedules.insert(ScheduleOf(module));
  const int64_t most_rounds = schedules.size() > 1 ? std::max<int64_t>(3, in_run_steps / 3) : 3;
  const int in_run_rounds =
      in_run ? static_cast<int>(std::min<int64_t>(most_rounds, in_run_steps)) : 0;
  int in_run_round = 0;
  // Each plan's rounds: what each timed, by signature, and its op time (RoundOpTime).
  std::vector<std::vector<std::map<std::string, std::vector<double>>>> rounds(to_run.size());
  std::vector<std::vector<double>> round_times(to_run.size());
  auto run_round = [&](int steps, const std::string& which) -> Status {
    InRunOptions run;
    run.steps = steps;
    run.micro_batches = static_cast<int>(micro_batches);
    run.kernel_threads = options.blas_threads;
    for (size_t i = 0; i < to_run.size(); ++i) {
      const Module& module = to_run[i];
      bar.Update(0, ops.size(),
                 StrCat("a ", run.steps, "-step run of ", module.name, " (", which, ")"));
      StatusOr<std::map<std::string, std::vector<double>>> measured = MeasureOpsInRun(module, run);
      if (!measured.ok()) return measured.status().WithContext(StrCat("--in-run of ", module.name));
      round_times[i].push_back(RoundOpTime(*measured));
      rounds[i].push_back(std::move(measured).value());
    }
    return OkStatus();
  };
  auto measure_in_run = [&]() -> Status {
    if (in_run_round == in_run_rounds) return OkStatus();
    // The steps left, over the rounds left.
    const int64_t done = in_run_steps * in_run_round / in_run_rounds;
    const int steps = static_cast<int>(in_run_steps * (in_run_round + 1) / in_run_rounds - done);
    ++in_run_round;
    return run_round(steps, StrCat(in_run_round, " of ", in_run_rounds));
  };
  PW_RETURN_IF_ERROR(measure_in_run());
  std::set<std::string> in_run_keys;  // every round of a plan times the same signatures
  for (const auto& plan_rounds : rounds)
    for (const auto& [key, seconds] : plan_rounds.front()) in_run_keys.insert(key);
  std::vector<cost::CostedOp> alone;
  for (const cost::CostedOp& c : ops)
    if (!in_run_keys.count(c.sig.key)) alone.push_back(c);
  PW_ASSIGN_OR_RETURN(cost::ProfileResult result, cost::ProfileOps(alone, options));
  PW_RETURN_IF_ERROR(measure_in_run());
  bar.Finish();
  cost::DeviceSpec& spec = *result.table.mutable_proto().mutable_device_spec();
  if (!on_gpu && !flags.Has("no-calibrate")) {
    PW_ASSIGN_OR_RETURN(RuntimeOverheads overheads, CalibrateRuntimes(options));
    spec.set_op_overhead(overheads.executor);
    spec.set_reference_op_overhead(overheads.reference);
    std::fprintf(stderr,
                 "runtime overhead per op: executor %.2f us, reference runner %.2f us (tiny GPT: "
                 "%.0f ops, kernels %.3f ms, executor %.3f ms, reference %.3f ms per step)\n",
                 overheads.executor * 1e6, overheads.reference * 1e6, overheads.ops,
                 overheads.kernels_ms, overheads.executor_ms, overheads.reference_ms);
    spec.set_wait_cpu(MeasureWaitCpu(spec.cores_per_node()));
    std::fprintf(stderr, "CPU per wait for another stream's event on busy cores: %.1f us\n",
                 spec.wait_cpu() * 1e6);
  }
  if (!on_gpu && spec.cores_per_node() > 0)
    std::fprintf(stderr,
                 "a stream thread's turn on a core that compute holds: %.2f ms spinning, %.2f x "
                 "the CPU it used since it slept once woken\n",
                 spec.held_spin_latency() * 1e3, spec.held_wake_factor());
  while (in_run_round < in_run_rounds) PW_RETURN_IF_ERROR(measure_in_run());
  // Rounds that met a slow spell are taken again, up to as many more as were planned, of
  // every plan (so that schedules still take turns), until each plan has as many steady.
  const size_t wanted = static_cast<size_t>(in_run_rounds);
  const int retake_steps =
      static_cast<int>((in_run_steps + in_run_rounds - 1) / std::max(in_run_rounds, 1));
  for (int again = 1; again <= in_run_rounds; ++again) {
    if (std::none_of(round_times.begin(), round_times.end(),
                     [&](const std::vector<double>& t) { return WantsAnotherRound(t, wanted); }))
      break;
    PW_RETURN_IF_ERROR(run_round(retake_steps, StrCat("again, ", again, " of up to ", in_run_rounds,
                                                      ": a round met a slower machine")));
  }
  bar.Finish();
  // The table prices from each plan's steady rounds.
  std::map<std::string, std::vector<double>> run_seconds;
  // The same per schedule of the runs' plans (ScheduleOf): each schedule's entries are kept
  // apart where the runs' plans have more than one.
  std::map<std::string, std::map<std::string, std::vector<double>>> schedule_seconds;
  for (size_t i = 0; i < to_run.size(); ++i) {
    if (std::string note = UnsteadyRoundsNote(to_run_paths[i], round_times[i], wanted);
        !note.empty())
      std::fprintf(stderr, "%s\n", note.c_str());
    auto& own = schedule_seconds[ScheduleOf(to_run[i])];
    for (size_t r : SteadyRounds(round_times[i]))
      for (const auto& [key, seconds] : rounds[i][r]) {
        run_seconds[key].insert(run_seconds[key].end(), seconds.begin(), seconds.end());
        own[key].insert(own[key].end(), seconds.begin(), seconds.end());
      }
  }
  auto entry_of = [&](const cost::CostedOp& c, const std::vector<double>& seconds) {
    return cost::EntryFromSamples(c.sig, seconds,
                                  options.blas_threads == 1 ? seconds : std::vector<double>{});
  };
  for (const cost::CostedOp& c : ops) {
    auto it = run_seconds.find(c.sig.key);
    if (it == run_seconds.end()) continue;
    result.table.Add(entry_of(c, it->second));
    if (schedule_seconds.size() < 2) continue;
    for (const auto& [schedule, own] : schedule_seconds) {
      auto mine = own.find(c.sig.key);
      if (mine == own.end()) continue;
      cost::OpCostEntry entry = entry_of(c, mine->second);
      entry.set_schedule(schedule);
      result.table.Add(entry);
    }
  }
  for (const auto& [schedule, own] : schedule_seconds)
    result.table.mutable_proto().add_in_run_schedules(schedule);
  if (schedule_seconds.size() > 1)
    std::fprintf(stderr,
                 "ops timed in runs of %s plans: each schedule's costs kept apart (sim prices a "
                 "plan with its schedule's own)\n",
                 result.table.InRunSchedulesText().c_str());
  if (in_run) RecordStaleBytes(stale, in_run_keys, result.table);
  // The reference runner runs an unplanned module: its overhead per op measured on the
  // first one itself, its ops as large as they are there.
  const auto unplanned = std::find_if(to_run.begin(), to_run.end(),
                                      [](const Module& module) { return module.plan.empty(); });
  if (!on_gpu && !flags.Has("no-calibrate") && unplanned != to_run.end()) {
    PW_ASSIGN_OR_RETURN(
        ReferenceCalibration reference,
        CalibrateReferenceOn(*unplanned, static_cast<int>(micro_batches), options.blas_threads,
                             result.table, spec.op_overhead()));
    spec.set_reference_op_overhead(reference.reference);
    std::fprintf(stderr,
                 "reference runner's overhead per op on %s: %.2f us (its steps %.3fx the "
                 "executor's, the median of %d alternated rounds: %.3f against %.3f ms over %d "
                 "steps each; %.0f ops)\n",
                 to_run_paths[unplanned - to_run.begin()].c_str(), reference.reference * 1e6,
                 reference.ratio, reference.rounds, reference.reference_ms, reference.executor_ms,
                 reference.steps, reference.ops);
  }

  if (flags.Has("comm")) {
    ProgressBar comm_bar("communication");
    std::vector<cost::MeasuredStep> measured_steps;
    CaughtWaits caught;
    for (size_t m = 0; m < communicating.size(); ++m) {
      const Module& module = communicating[m];
      // --comm-runs measuring runs, and up to kMeasuringRetakes more while the fastest is
      // unconfirmed or beyond the fit's reach; the fit rests on the median of those near the
      // fastest (KeptRun). A slow spell of the machine only ever slows a run, and the runs to
      // predict step outside them (their median step does).
      std::vector<cost::CommProfile> runs;
      std::vector<double> run_steps;
      for (int run = 1;; ++run) {
        if (run > comm_runs) {
          if (run > comm_runs + kMeasuringRetakes) break;
          double beyond = 0;
          if (spec.cores_per_node() > 0) {
            const cost::CommProfile& fastest =
                runs[std::min_element(run_steps.begin(), run_steps.end()) - run_steps.begin()];
            PW_ASSIGN_OR_RETURN(beyond,
                                BeyondFit(module, fastest, result.table, caught, comm_steps - 1));
          }
          if (FastestConfirmed(run_steps) && beyond <= kBeyondReach) break;
        }
        comm_bar.Update(m, communicating.size(),
                        StrCat("a ", comm_steps, "-step run of ", module.name, " on ",
                               module.mesh.world_size(), " ranks (", run, ")"));
        StatusOr<cost::CommProfile> measured =
            MeasureComm(module, result.table, static_cast<int>(comm_steps), placement);
        if (!measured.ok()) return measured.status().WithContext(module.name);
        run_steps.push_back(measured->step_seconds);
        runs.push_back(std::move(measured).value());
      }
      const cost::CommProfile* comm = &runs[KeptRun(run_steps)];
      if (run_steps.size() > 1) {
        std::string listed;
        for (double seconds : run_steps) {
          char ms[32];
          std::snprintf(ms, sizeof ms, "%s%.2f", listed.empty() ? "" : ", ", seconds * 1e3);
          listed += ms;
        }
        std::fprintf(stderr,
                     "the measuring runs of %s stepped %s ms%s: the fit rests on the %.2f ms "
                     "one (the median of those within %.2fx of the fastest)\n",
                     module.name.c_str(), listed.c_str(),
                     static_cast<int64_t>(run_steps.size()) > comm_runs
                         ? " (the last beyond --comm-runs: the fastest was unconfirmed or beyond "
                           "the simulation's reach)"
                         : "",
                     comm->step_seconds * 1e3, kBeyondReach);
      }
      measured_steps.push_back({&module, comm->step_seconds});
      caught.Add(*comm, comm_steps - 1);
      for (const cost::CommFit& f : comm->fits) {
        result.table.MergeComm(f);  // several plans' runs: their measurements pooled
        std::fprintf(stderr,
                     "%s over %d ranks (%d in the run, %.3f ms compute between): %.1f us + %.3f "
                     "us/KiB (residual %.1f %%), %.1f us CPU per operation%s\n",
                     f.kind().c_str(), f.group_size(), f.ranks(), f.compute_gap() * 1e3,
                     f.alpha() * 1e6, f.beta() * 1024 * 1e6, 100 * f.residual(),
                     f.cpu_per_op() * 1e6, StragglesText(f).c_str());
        // What each size took, measured: a fit over sizes far apart (statistics of a few
        // bytes beside activations) says little about either.
        for (const auto& sample : f.samples())
          std::fprintf(stderr, "  %s of %.0f B: median %.1f us, mean %.1f us\n", f.kind().c_str(),
                       sample.bytes(), sample.median() * 1e6, sample.mean() * 1e6);
      }
    }
    comm_bar.Finish();
    const bool pipelined =
        std::any_of(result.table.proto().comm().begin(), result.table.proto().comm().end(),
                    [](const cost::CommFit& f) { return f.kind() == "send_recv"; });
    if (pipelined && spec.cores_per_node() > 0 && !flags.Has("no-calibrate")) {
      StatusOr<TransferCpu> transfer = MeasureTransferCpu(spec.cores_per_node());
      if (!transfer.ok()) return transfer.status().WithContext("measuring a transfer's CPU");
      if (transfer->measured()) {
        spec.set_transfer_cpu(transfer->seconds);
        std::fprintf(stderr,
                     "compute a pipeline transfer takes from busy cores: %.1f us (%d rounds of "
                     "%.1f-%.1f us, %d transfers)\n",
                     transfer->seconds * 1e6, transfer->rounds, transfer->low * 1e6,
                     transfer->high * 1e6, transfer->transfers);
      } else {
        std::fprintf(stderr,
                     "compute a pipeline transfer takes from busy cores: not measured: other work "
                     "shared the cores (the probe's threads got %.0f %% of theirs, their rate "
                     "moved %.0f %%); sim charges transfers their share of the run's CPU instead. "
                     "Profile on an otherwise idle machine to measure it\n",
                     100 * transfer->lowest_share, 100 * transfer->worst_drift);
      }
    }
    if (spec.cores_per_node() > 0) {
      caught.Record(spec);
      PW_RETURN_IF_ERROR(FitTurns(measured_steps, result.table));
    }
  }

  if (merge) {
    PW_RETURN_IF_ERROR(merged.Merge(result.table));
    result.table = std::move(merged);
  }
  PW_RETURN_IF_ERROR(
      outputs.Write(output, [&](const std::string& temp) { return result.table.Save(temp); }));
  PW_RETURN_IF_ERROR(outputs.Commit());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (on_gpu)
    std::printf("profiled %zu op signatures on %s in %.1f s", ops.size() - result.skipped.size(),
                device.c_str(), seconds);
  else if (in_run)
    std::printf(
        "profiled %zu op signatures (%d kernel thread%s; %zu in the run, the rest alone "
        "with caches: %s) in %.1f s",
        ops.size() - result.skipped.size(), options.blas_threads,
        options.blas_threads == 1 ? "" : "s", ops.size() - alone.size(),
        cost::CacheStateName(options.cache), seconds);
  else
    std::printf("profiled %zu op signatures (%d kernel thread%s, caches: %s) in %.1f s",
                ops.size() - result.skipped.size(), options.blas_threads,
                options.blas_threads == 1 ? "" : "s", cost::CacheStateName(options.cache), seconds);
  if (!result.skipped.empty())
    std::printf(" (%zu without a %s kernel: roofline only)", result.skipped.size(),
                on_gpu ? "CUDA" : "CPU");
  std::printf("; wrote %s (%zu entries)\n", output.c_str(), result.table.size());
  for (const std::string& failure : result.failed)
    std::fprintf(stderr, "not measured: %s\n", failure.c_str());
  if (!result.failed.empty()) {
    std::fprintf(stderr,
                 "%zu op signatures could not be timed on %s (above); the table has the rest\n",
                 result.failed.size(), device.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(profile, "profile", "measure op and communication costs into a cost table",
                    kUsage, RunProfile, /*internal=*/false, /*trains=*/true);

}  // namespace pw::tools
