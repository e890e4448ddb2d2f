// `pipeweave run-parallel FILE --nproc N ...`: trains a planned module on N local rank
// processes (the launcher), or runs one rank of a multi-machine run (`--rank R
// --world-size N --store DIR|redis://HOST:PORT`). `pipeweave run` hands over to it for
// everything but --reference (tools/run_parallel.h).

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "executor/backend_factory.h"
#include "executor/interpreter.h"
#include "executor/launcher.h"
#include "executor/plan_check.h"
#include "executor/rank_process.h"
#include "executor/reference_runner.h"
#include "executor/run_dir_claim.h"
#include "executor/run_report.h"
#include "executor/sequential_plan.h"
#include "executor/training_feed.h"
#include "ir/file_util.h"
#include "ir/limits.h"
#include "ir/proto_io.h"
#include "passes/pass_manager.h"
#include "tools/checkpoint_flags.h"
#include "tools/cluster_env.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/global_batch_flag.h"
#include "tools/module_validation.h"
#include "tools/run_parallel.h"
#include "tools/step_trace.h"
#include "tools/threads_flag.h"

namespace pw::tools {
namespace {

constexpr const char* kUsage =
    "pipeweave run-parallel FILE --nproc N [--steps K (1)] [--seed S]\n"
    "           [--micro-batches M | --global-batch G]\n"
    "           [--pipeline PASSES] [--report json] [--run-dir DIR] [--save-params DIR]\n"
    "           [--strict-events] [--data TEXT_FILE] [--compare-reference FILE]\n"
    "           [--backend cpu|cuda] [--threads N] [--trace DIR [--trace-cpu]] [--warmup-steps W "
    "(1)]\n"
    "           [--transfers tcp|gloo (tcp)]\n"
    "           [--checkpoint-dir DIR [--checkpoint-every K] [--keep N]] [--resume PATH]\n"
    "   or: pipeweave run-parallel FILE --rank R --world-size N --store DIR|redis://HOST:PORT\n"
    "           [--hostname ADDR] [same training flags]\n"
    "   or: the same under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR)\n"
    "           or srun (SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST): docs/multi-host.md\n"
    "Trains a module whose plan gives every rank its jobs (or an unplanned single-stage one,\n"
    "M micro-batches per step) on N rank processes of this machine, and prints 'step S loss L'\n"
    "per step from the last stage; --report json prints {\"losses\": [...], \"step_time_ms\":\n"
    "[...], \"step_cpu_ms\": [the rank processes' CPU time in each step, summed], \"peak_bytes\":\n"
    "[per rank]}. --pipeline runs passes first (e.g.\n"
    "\"append-backward,split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p\").\n"
    "--global-batch G (samples per step) is M = G / (dp x micro-batch size) micro-batches per\n"
    "replica, each replica its own slice of the step's data; G must be such a multiple and\n"
    "agree with the plan's micro-batches.\n"
    "--compare-reference trains FILE (unsplit, mp=1, pp=1) with the sequential reference\n"
    "runner on the same tokens and prints its loss next to each step's.\n"
    "--backend cuda runs every rank on a GPU (rank % visible devices) with NCCL between\n"
    "ranks; the default is cpu (worker threads, TCP between ranks).\n"
    "--threads sets each rank's BLAS threads (default: $OPENBLAS_NUM_THREADS,\n"
    "$OMP_NUM_THREADS, else this machine's cores shared among its N ranks).\n"
    "--trace DIR writes DIR/rankR.trace.json per rank: the step before the last as measured\n"
    "(the last itself meets the ranks that finish first leaving), one track per stream, each\n"
    "instruction from when it began to when it ended and the waits for its events (the\n"
    "tracks of 'pipeweave sim --trace', to open side by side); on ranks sharing cores a traced\n"
    "step runs ~5 % longer than the others. Each instruction names the plan's job it does\n"
    "(job: 0F3, 1B2, 0OPT, as sim --trace names them), and each trace where its step began on\n"
    "the host's steady clock (otherData): scripts/compare_traces.py puts the ranks of one host\n"
    "on one time line.\n"
    "--trace-cpu adds each instruction's stream-thread CPU time (cpu_us: without the time it\n"
    "waited for a core) at two reads of the thread's CPU clock per instruction (system\n"
    "calls): a traced step then runs ~35 % longer on ranks sharing cores.\n"
    "--warmup-steps W runs W untimed steps on the first step's data before it and undoes\n"
    "their updates (bit for bit), so that the first timed step costs what the later ones do\n"
    "(kernels generated, memory faulted in); 0 times the first step cold.\n"
    "--transfers picks what carries the CPU backend's pipeline transfers: tcp, one connection\n"
    "per ordered pair of ranks that the sending and the receiving stream drive themselves, or\n"
    "gloo, Gloo's TCP pairs (a handshake through each side's network thread), to compare.\n"
    "If a rank dies, the others stop and the run exits non-zero naming it.";

struct StepRow {
  int reports = 0;
  double loss_sum = 0;
  int loss_count = 0;
  double max_ms = 0;
  double cpu_ms = 0;    // the ranks' processes', summed; NaN once a rank did not measure it
  bool redone = false;  // post-validation ran it twice (every rank does)
  std::vector<int64_t> checkpoint_bytes;  // per rank; empty: no checkpoint after the step
  std::vector<double> checkpoint_ms;
};

bool HasBackward(const Module& module) {
  for (const Program& p : module.programs())
    for (const Op& op : p.ops())
      if (op.role == OpRole::kBackward) return true;
  return false;
}

// Loads FILE, runs --pipeline (or append-backward for a forward-only module) and checks the
// plan, so that a bad plan is refused before any process starts.
StatusOr<Module> PrepareModule(const Flags& flags) {
  PW_ASSIGN_OR_RETURN(Module module, LoadValidModule(flags.positional()[0]));
  std::string pipeline = flags.Get("pipeline");
  if (pipeline.empty() && module.plan.empty() && !HasBackward(module)) pipeline = "append-backward";
  if (!pipeline.empty()) {
    PassManager pm;
    PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
    PW_RETURN_IF_ERROR(pm.Run(module).status());
  }
  if (!module.plan.empty()) {
    LoweringOptions lowering;
    lowering.feeds = ModuleInputs(module);
    lowering.loss = ModuleLoss(module);
    lowering.strict_events = flags.Has("strict-events");
    PW_RETURN_IF_ERROR(CheckPlanForAllRanks(module, lowering));
  }
  return module;
}

Status ReadTrainingFlags(const Flags& flags, const Module& module, RankRunOptions& run) {
  PW_ASSIGN_OR_RETURN(run.steps, flags.GetInt("steps", 1));
  PW_ASSIGN_OR_RETURN(int64_t mb, flags.GetInt("micro-batches", 1, 1, kMaxMicroBatches));
  PW_ASSIGN_OR_RETURN(run.checkpoint, ReadCheckpointFlags(flags));
  PW_ASSIGN_OR_RETURN(const uint64_t default_seed,
                      ResumedDataSeed(run.checkpoint, module.metadata.GetInt("seed", 1)));
  PW_ASSIGN_OR_RETURN(int64_t seed,
                      flags.GetInt("seed", static_cast<int64_t>(default_seed), 0, kInt64Max));
  if (run.steps < 1) return InvalidArgument("flag --steps must be >= 1");
  run.micro_batches = static_cast<int>(mb);
  PW_ASSIGN_OR_RETURN(std::optional<int> from_global,
                      ReadGlobalBatchFlag(flags, module, module.mesh.dp));
  if (from_global) run.micro_batches = *from_global;
  run.data.data_seed = static_cast<uint64_t>(seed);
  run.data.data_file = flags.Get("data");
  run.strict_events = flags.Has("strict-events");
  PW_ASSIGN_OR_RETURN(int64_t warmup, flags.GetInt("warmup-steps", 1, 0, 100));
  run.warmup_steps = static_cast<int>(warmup);
  PW_ASSIGN_OR_RETURN(run.backend, ParseBackendKind(flags.Get("backend", "cpu")));
  return OkStatus();
}

std::string RankReportJson(const Module& module, int64_t rank, int64_t world,
                           const std::vector<RankStepReport>& reports);

// The address a rank listens on: --hostname, else the route's source address toward the
// store's host (so that ranks on other machines can reach it), else loopback.
std::string ListenAddress(const RankPlacement& placement) {
  if (!placement.hostname.empty()) return placement.hostname;
  const std::string host = StoreHost(placement.store);
  if (host.empty()) return "127.0.0.1";
  auto local = LocalAddressToward(host);
  return local.ok() ? *local : "127.0.0.1";
}

StatusOr<TransferTransport> ReadTransfersFlag(const Flags& flags) {
  const std::string transfers = flags.Get("transfers", "tcp");
  if (transfers != "tcp" && transfers != "gloo")
    return InvalidArgument("flag --transfers: unknown transport '", transfers, "' (tcp, gloo)");
  return transfers == "gloo" ? TransferTransport::kGloo : TransferTransport::kTcpLink;
}

// One rank: report lines go to --report-fd under the launcher; alone, the rank that
// reports the loss prints it (or, with --report json, prints one JSON object at the end).
StatusOr<int> RunOneRank(const Flags& flags, const RankPlacement& placement) {
  std::string report = flags.Get("report");
  if (!report.empty() && report != "json")
    return InvalidArgument("flag --report: unknown format '", report, "' (json)");
  PW_ASSIGN_OR_RETURN(Module module, PrepareModule(flags));
  RankProcessOptions options;
  PW_RETURN_IF_ERROR(ReadTrainingFlags(flags, module, options.run));
  const int64_t rank = placement.rank, world = placement.world_size;
  if (world != module.mesh.world_size())
    return InvalidArgument(placement.world_source,
                           " does not match the module's mesh (dp=", module.mesh.dp,
                           " pp=", module.mesh.pp, " mp=", module.mesh.mp, ")");
  options.run.rank = static_cast<int>(rank);
  options.run.process_cpu = true;
  // Ranks on one machine share its cores; Slurm may say how many are this rank's.
  PW_ASSIGN_OR_RETURN(options.threads,
                      ReadThreadsFlag(flags, std::max(1, placement.local_world_size)));
  if (placement.cpus_per_rank > 0 && !flags.Has("threads"))
    options.threads = placement.cpus_per_rank;
  if (options.run.backend == BackendKind::kCuda && placement.local_rank >= 0)
    options.run.device = placement.local_rank;
  options.store = placement.store;
  options.gloo.hostname = ListenAddress(placement);
  PW_ASSIGN_OR_RETURN(options.gloo.transfers, ReadTransfersFlag(flags));
  // The folders this rank writes into exist before it trains, as the launcher makes them
  // for its ranks: a folder that cannot be made costs no run.
  for (const char* folder_flag : {"save-params", "trace"}) {
    const std::string folder = flags.Get(folder_flag);
    std::error_code error;
    if (!folder.empty() && !std::filesystem::create_directories(folder, error) && error)
      return InvalidArgument("--", folder_flag, " ", folder,
                             ": cannot create the folder: ", error.message());
  }
  if (!flags.Get("save-params").empty())
    options.run.save_params = StrCat(flags.Get("save-params"), "/rank", rank, ".params");
  if (!flags.Get("trace").empty()) {
    const std::string path = StrCat(flags.Get("trace"), "/rank", rank, ".trace.json");
    // The step before the last is written (the last only when it is the one step run): the
    // last runs 5-50 % longer than the others on shared cores, while the ranks that finish
    // it first sync their parameters and exit beside the rest. Written after the run.
    options.run.traced_steps = 2;
    options.run.trace_cpu_time = flags.Has("trace-cpu");
    auto captured = std::make_shared<std::optional<StepTimes>>();
    options.run.on_traced_step = [captured](const Interpreter& interp) {
      if (!captured->has_value()) *captured = CaptureStepTimes(interp);
      return OkStatus();
    };
    options.run.on_run_end = [path, captured](const Interpreter& interp) {
      if (!captured->has_value()) return OkStatus();  // no step ran (resumed at the end)
      return WriteFileAtomically(path, StepTraceJson(interp, **captured));
    };
  }
  PW_ASSIGN_OR_RETURN(int64_t fd, flags.GetInt("report-fd", -1));
  std::vector<RankStepReport> reports;  // --report json
  if (fd >= 0) {
    // Heartbeats stay on under the launcher too: it sees a rank die, but only the
    // peers' watchdogs see one stop (SIGSTOP, a stuck host thread) and name it.
    options.run.on_step = [fd](const RankStepReport& r) {
      const std::string line = StepReportLine(r);
      (void)!write(static_cast<int>(fd), line.data(), line.size());
    };
  } else if (report == "json") {
    options.run.on_step = [&reports](const RankStepReport& r) { reports.push_back(r); };
  } else {
    options.run.on_step = [](const RankStepReport& r) {
      if (r.loss_count > 0)
        std::printf("step %lld loss %.4f (%.1f ms, rank %d%s)\n",
                    static_cast<long long>(r.step + 1), r.loss_sum / r.loss_count, r.step_ms,
                    r.rank, r.redone ? ", run twice" : "");
      if (r.checkpoint_bytes > 0)
        std::printf("checkpoint after step %lld: %.2f MiB, %.1f ms (rank %d)\n",
                    static_cast<long long>(r.step + 1), r.checkpoint_bytes / 1048576.0,
                    r.checkpoint_ms, r.rank);
      std::fflush(stdout);
    };
  }
  const int code = RunRankProcess(module, options);
  if (code == 0 && report == "json" && fd < 0)
    std::printf("%s", RankReportJson(module, rank, world, reports).c_str());
  return code;
}

std::string FormatJsonNumber(double value, const char* fmt) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

void PrintJsonArray(const char* key, const std::vector<double>& values, const char* fmt) {
  std::printf("\"%s\": [", key);
  for (size_t i = 0; i < values.size(); ++i) {
    std::printf(i ? ", " : "");
    if (std::isfinite(values[i]))
      std::printf(fmt, values[i]);
    else
      std::printf("null");
  }
  std::printf("]");
}

// One rank's --report json: its own steps; "losses" only from a rank that computes the
// loss (mp rank 0 of the last stage), null elsewhere.
std::string RankReportJson(const Module& module, int64_t rank, int64_t world,
                           const std::vector<RankStepReport>& reports) {
  std::string losses, times, cpu;
  int64_t peak = 0;
  double warmup_ms = 0;
  for (const RankStepReport& r : reports) {
    warmup_ms = std::max(warmup_ms, r.warmup_ms);
    const char* sep = losses.empty() ? "" : ", ";
    losses += r.loss_count > 0 ? StrCat(sep, FormatJsonNumber(r.loss_sum / r.loss_count, "%.17g"))
                               : StrCat(sep, "null");
    times += StrCat(times.empty() ? "" : ", ", FormatJsonNumber(r.step_ms, "%.3f"));
    cpu += StrCat(cpu.empty() ? "" : ", ", FormatJsonNumber(r.MeasuredCpuMs(), "%.3f"));
    peak = std::max<int64_t>(peak, r.peak_bytes);
  }
  return StrCat("{\"mode\": \"rank\", \"rank\": ", rank, ", \"world_size\": ", world,
                ", \"schedule\": \"", ScheduleOf(module), "\", ", "\"losses\": [", losses,
                "], \"step_time_ms\": [", times, "], \"step_cpu_ms\": [", cpu,
                "], \"peak_bytes\": ", peak,
                ", \"warmup_ms\": ", FormatJsonNumber(warmup_ms, "%.3f"), "}\n");
}

StatusOr<int> Launch(const Flags& flags, const std::vector<std::string>& args) {
  PW_ASSIGN_OR_RETURN(Module module, PrepareModule(flags));
  RankRunOptions run;
  PW_RETURN_IF_ERROR(ReadTrainingFlags(flags, module, run));
  // Refused here, once, rather than by every rank process.
  PW_RETURN_IF_ERROR(CheckBackendAvailable(run.backend));
  PW_ASSIGN_OR_RETURN(int64_t nproc, flags.RequireInt("nproc", 1, kMaxWorldSize));
  if (nproc != module.mesh.world_size())
    return InvalidArgument(
        "--nproc ", nproc, " does not match the module's mesh (dp=", module.mesh.dp,
        " pp=", module.mesh.pp, " mp=", module.mesh.mp, ": ", module.mesh.world_size(), " ranks)");
  std::string report = flags.Get("report");
  if (!report.empty() && report != "json")
    return InvalidArgument("flag --report: unknown format '", report, "' (json)");
  const bool json = report == "json";
  PW_ASSIGN_OR_RETURN(const int threads, ReadThreadsFlag(flags, static_cast<int>(nproc)));
  const int per_replica = module.plan.empty() ? run.micro_batches : module.plan.num_micro_batches;
  const CheckpointManifest header = RunHeader(module, int64_t{per_replica} * module.mesh.dp,
                                              run.data.data_file.empty() ? "synthetic" : "file",
                                              run.data.data_seed, run.data.data_file);
  PW_ASSIGN_OR_RETURN(const int64_t first_step,
                      CheckCheckpointsBeforeRun(run.checkpoint, module, header, run.steps));

  namespace fs = std::filesystem;
  std::string run_dir = flags.Get("run-dir");
  RemovedAtExit made_run_dir;  // declared before the claim: removed after the claim lets go
  if (run_dir.empty()) {
    PW_ASSIGN_OR_RETURN(run_dir, MakeRunDir("pipeweave-run"));
    made_run_dir.path = run_dir;
  }
  // Held until the ranks are done: a second run on this directory is refused at once.
  PW_ASSIGN_OR_RETURN(RunDirClaim claim, RunDirClaim::Claim(run_dir));
  if (!flags.Get("save-params").empty()) fs::create_directories(flags.Get("save-params"));
  if (!flags.Get("trace").empty()) fs::create_directories(flags.Get("trace"));
  // Ranks load the prepared module, so passes run once.
  std::string prepared = (fs::path(run_dir) / "module.pb").string();
  PW_RETURN_IF_ERROR(SaveModule(module, prepared));

  LaunchOptions options;
  options.nproc = static_cast<int>(nproc);
  options.run_dir = run_dir;
  options.args = {"run-parallel", prepared};
  for (const char* name : {"steps", "seed", "micro-batches", "global-batch", "data", "save-params",
                           "backend", "trace", "warmup-steps", "transfers"})
    if (flags.Has(name)) {
      options.args.push_back(StrCat("--", name));
      options.args.push_back(flags.Get(name));
    }
  if (flags.Has("seed") == false) {
    options.args.push_back("--seed");
    options.args.push_back(std::to_string(run.data.data_seed));
  }
  if (flags.Has("strict-events")) options.args.push_back("--strict-events");
  if (flags.Has("trace-cpu")) options.args.push_back("--trace-cpu");
  for (const char* name : {"checkpoint-dir", "checkpoint-every", "keep"})
    if (flags.Has(name)) {
      options.args.push_back(StrCat("--", name));
      options.args.push_back(flags.Get(name));
    }
  if (!run.checkpoint.resume.empty()) {  // the very checkpoint, resolved once for all ranks
    options.args.push_back("--resume");
    options.args.push_back(run.checkpoint.resume);
  }
  options.args.push_back("--threads");
  options.args.push_back(std::to_string(threads));

  // The single-rank reference on the same tokens: M·dp micro-batches per step.
  std::vector<double> reference;
  if (flags.Has("compare-reference")) {
    PW_ASSIGN_OR_RETURN(Module ref_module, LoadValidModule(flags.Get("compare-reference")));
    if (!HasBackward(ref_module)) {
      PassManager pm;
      PW_RETURN_IF_ERROR(pm.AddPipeline("append-backward"));
      PW_RETURN_IF_ERROR(pm.Run(ref_module).status());
    }
    ReferenceOptions ro;
    ro.steps = run.steps;
    ro.micro_batches = static_cast<int64_t>(per_replica) * module.mesh.dp;
    ro.data_seed = run.data.data_seed;
    ro.data_file = run.data.data_file;
    PW_ASSIGN_OR_RETURN(ro.threads, ReadThreadsFlag(flags, 1));  // before the ranks start
    PW_ASSIGN_OR_RETURN(ReferenceResult ref, RunReference(ref_module, ro));
    reference = ref.losses;
  }

  std::map<int64_t, StepRow> rows;
  std::vector<double> peak(nproc, 0);
  std::vector<double> resume_ms(nproc, 0);
  double warmup_ms = 0;  // the slowest rank's
  int64_t next_print = first_step;
  options.on_report = [&](int rank, const std::string& line) {
    RankStepReport r;
    if (!ParseStepReport(line, &r)) return;
    StepRow& row = rows[r.step];
    ++row.reports;
    row.loss_sum += r.loss_sum;
    row.loss_count += r.loss_count;
    row.max_ms = std::max(row.max_ms, r.step_ms);
    row.cpu_ms += r.MeasuredCpuMs();
    row.redone = row.redone || r.redone;
    if (r.checkpoint_bytes > 0) {
      row.checkpoint_bytes.resize(nproc, 0);
      row.checkpoint_ms.resize(nproc, 0);
      row.checkpoint_bytes[rank] = r.checkpoint_bytes;
      row.checkpoint_ms[rank] = r.checkpoint_ms;
    }
    peak[rank] = std::max(peak[rank], static_cast<double>(r.peak_bytes));
    resume_ms[rank] = std::max(resume_ms[rank], r.resume_ms);
    warmup_ms = std::max(warmup_ms, r.warmup_ms);
    while (!json && rows.count(next_print) && rows[next_print].reports == nproc) {
      const StepRow& r = rows[next_print];
      if (next_print == first_step && first_step > 0)
        std::printf("resumed after step %lld: checkpoint loaded in %.1f ms on the slowest rank\n",
                    static_cast<long long>(first_step),
                    *std::max_element(resume_ms.begin(), resume_ms.end()));
      if (next_print == first_step && run.warmup_steps > 0)
        std::printf("warm-up: %d untimed step%s, %.1f ms on the slowest rank\n", run.warmup_steps,
                    run.warmup_steps == 1 ? "" : "s", warmup_ms);
      std::printf("step %lld loss %.4f", static_cast<long long>(next_print + 1),
                  r.loss_count ? r.loss_sum / r.loss_count : NAN);
      if (next_print < static_cast<int64_t>(reference.size()))
        std::printf("  reference %.4f", reference[next_print]);
      std::printf("  (%.1f ms%s)\n", r.max_ms,
                  r.redone ? ", run twice: the step before overflowed (post-validate)" : "");
      if (!r.checkpoint_bytes.empty()) {
        const int64_t largest =
            *std::max_element(r.checkpoint_bytes.begin(), r.checkpoint_bytes.end());
        int64_t all = 0;
        for (int64_t b : r.checkpoint_bytes) all += b;
        std::printf(
            "checkpoint after step %lld: %.2f MiB on the largest rank, %.2f MiB in all, "
            "%.1f ms on the slowest\n",
            static_cast<long long>(next_print + 1), largest / 1048576.0, all / 1048576.0,
            *std::max_element(r.checkpoint_ms.begin(), r.checkpoint_ms.end()));
      }
      std::fflush(stdout);
      ++next_print;
    }
  };
  PW_ASSIGN_OR_RETURN(LaunchResult result, LaunchRanks(options));
  if (!result.ok) {
    std::fprintf(stderr, "pipeweave run: %s; the run was stopped%s\n", result.failure.c_str(),
                 made_run_dir.path.empty() ? StrCat(" (run directory ", run_dir, ")").c_str() : "");
    for (size_t r = 0; r < result.exit_codes.size(); ++r) {
      int code = result.exit_codes[r];
      if (code != 0 && code != kExitPeerFailed && result.failure.find(StrCat("rank ", r, " ")) != 0)
        std::fprintf(stderr, "pipeweave run: rank %zu also ended with %s %d\n", r,
                     code > 128 ? "signal" : "exit code", code > 128 ? code - 128 : code);
    }
    return 1;
  }
  if (json) {
    std::vector<double> losses, times, cpu;
    std::string checkpoints;  // JSON objects: per rank, bytes and milliseconds
    std::string redone;       // steps post-validation ran twice
    for (const auto& [step, r] : rows) {
      losses.push_back(r.loss_count ? r.loss_sum / r.loss_count : NAN);
      times.push_back(r.max_ms);
      cpu.push_back(r.cpu_ms);
      if (r.redone) redone += StrCat(redone.empty() ? "" : ", ", step + 1);
      if (r.checkpoint_bytes.empty()) continue;
      std::string bytes, ms;
      for (int64_t i = 0; i < nproc; ++i) {
        bytes += StrCat(i ? ", " : "", r.checkpoint_bytes[i]);
        ms += StrCat(i ? ", " : "", r.checkpoint_ms[i]);
      }
      checkpoints += StrCat(checkpoints.empty() ? "" : ", ", "{\"step\": ", step + 1,
                            ", \"bytes\": [", bytes, "], \"ms\": [", ms, "]}");
    }
    std::printf("{\"mode\": \"parallel\", \"world_size\": %lld, \"schedule\": \"%s\", ",
                static_cast<long long>(nproc), ScheduleOf(module).c_str());
    std::printf("\"first_step\": %lld, ", static_cast<long long>(first_step + 1));
    PrintJsonArray("losses", losses, "%.17g");
    std::printf(", ");
    PrintJsonArray("step_time_ms", times, "%.3f");
    std::printf(", ");
    PrintJsonArray("step_cpu_ms", cpu, "%.3f");
    std::printf(", ");
    PrintJsonArray("peak_bytes", peak, "%.0f");
    std::printf(", \"warmup_steps\": %d, \"warmup_ms\": %s", run.warmup_steps,
                FormatJsonNumber(warmup_ms, "%.3f").c_str());
    if (!checkpoints.empty()) std::printf(", \"checkpoints\": [%s]", checkpoints.c_str());
    if (!redone.empty()) std::printf(", \"redone_steps\": [%s]", redone.c_str());
    if (first_step > 0) {
      std::printf(", ");
      PrintJsonArray("resume_ms", resume_ms, "%.3f");
    }
    if (!reference.empty()) {
      std::printf(", ");
      PrintJsonArray("reference_losses", reference, "%.17g");
    }
    std::printf("}\n");
  }
  return 0;
}

}  // namespace

StatusOr<int> RunParallel(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name : {"nproc",
                           "rank",
                           "world-size",
                           "store",
                           "report-fd",
                           "hostname",
                           "steps",
                           "seed",
                           "micro-batches",
                           "global-batch",
                           "data",
                           "report",
                           "run-dir",
                           "save-params",
                           "trace",
                           "pipeline",
                           "compare-reference",
                           "backend",
                           "threads",
                           "warmup-steps",
                           "transfers"})
    flags.Value(name);
  DeclareCheckpointFlags(flags);
  flags.Switch("strict-events");
  flags.Switch("trace-cpu");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one module file, got ", flags.positional().size(),
                           " positional arguments");
  PW_RETURN_IF_ERROR(ReadTransfersFlag(flags).status());
  if (flags.Has("trace-cpu") && flags.Get("trace").empty())
    return InvalidArgument(
        "--trace-cpu adds CPU times to the traces --trace DIR writes: pass "
        "--trace DIR too");
  const GetEnv env = [](const char* name) { return std::getenv(name); };
  if (flags.Has("nproc") && !flags.Has("rank")) {
    if (auto placed = EnvRankOfMany(env))
      return InvalidArgument("--nproc ", flags.Get("nproc"), " starts ranks on this machine but ",
                             *placed, " from the environment names one rank of a run: drop ",
                             "--nproc, or unset the variables");
    // The launcher's ranks are placed by their flags alone.
    for (const char* name : PlacementVariables()) unsetenv(name);
    return Launch(flags, args);
  }
  PW_ASSIGN_OR_RETURN(std::optional<RankPlacement> placement, ReadRankPlacement(flags, env));
  if (placement) return RunOneRank(flags, *placement);
  return InvalidArgument(
      "pass --nproc N (local ranks) or --rank R --world-size N --store ... (or start under "
      "torchrun or srun: docs/multi-host.md)");
}

PW_REGISTER_COMMAND(run_parallel, "run-parallel",
                    "train a planned module on rank processes (multi-stream executor)",
                    StrCat(kUsage, "\n", kCheckpointUsage), RunParallel, /*internal=*/false,
                    /*trains=*/true);

}  // namespace pw::tools
