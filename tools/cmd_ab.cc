// `pipeweave ab MODULE -a PIPELINE -b PIPELINE`: two plans of one module side by side,
// simulated (--sim) and measured on rank processes (--run), with the ratio B/A of every
// figure, a confidence interval on the measured step time, and a check that both plans
// train alike.

#include <cstdio>
#include <optional>
#include <sstream>

#include "ab/ab_svg.h"
#include "ab/compare.h"
#include "executor/backend_factory.h"
#include "executor/sequential_plan.h"
#include "ir/limits.h"
#include "passes/cost_inputs.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/module_validation.h"
#include "tools/output_files.h"
#include "tools/profiled_threads.h"
#include "tools/progress_bar.h"

namespace pw::tools {
namespace {

using ab::AbReport;
using ab::AbRunSettings;
using ab::SimulatedPlan;

constexpr const char* kUsage =
    "pipeweave ab MODULE -a PIPELINE -b PIPELINE [--sim] [--run] [--format table|json]\n"
    "           [-o OUT] [--json OUT.json] [--svg OUT.svg [--svg-rank R]]\n"
    "   --sim:  [--device cpu|h100|a100|SPEC_FILE (cpu)] [--costs COSTS]\n"
    "   --run:  --nproc N [--steps K (10)] [--rounds R (5)] [--seed S] [--backend cpu|cuda]\n"
    "           [--loss-tolerance T (1e-6)] [--stall-timeout SECONDS (120)] [--run-dir DIR]\n"
    "           [--strict-events] [--micro-batches M (1), for a module without a plan]\n"
    "           [--store redis://HOST:PORT --rank-prefix 'CMD {host} ...']\n"
    "Compares two plans of one module: MODULE is loaded once and each pass pipeline (as\n"
    "'pipeweave opt -p' takes it) runs on its own copy; --device and --costs reach the passes.\n"
    "--sim simulates both plans (as pipeweave sim): step time, bubble rate, exposed\n"
    "communication (total and by class: mp_forward, mp_backward, pp_send, pp_recv, dp,\n"
    "sp_forward, sp_backward), busy\n"
    "time per stream, each the worst rank's, and peak memory per rank; and B/A of each.\n"
    "--run trains both plans on N rank processes of this machine in R interleaved rounds (A,\n"
    "B, A, B, ...), each round a fresh set of processes running K steps. The first step of\n"
    "every round is dropped as warm-up (K >= 2); a step's time is its slowest rank's. Prints\n"
    "the median step time of each plan, the ratio of the medians B/A with a 95 % confidence\n"
    "interval, and a verdict. The interval is a percentile bootstrap of the rounds (a round's\n"
    "steps share its processes and the machine's moment): 10000 resamples, each drawing the\n"
    "rounds with replacement (A's and B's of one index together), then each drawn round's\n"
    "steps, under a fixed seed, so the same times give the same interval. The verdict reads\n"
    "'B faster by X % [lo, hi]' (the time B saves, 1 - B/A) or 'B slower by X % [lo, hi]'\n"
    "when the interval excludes 1, else 'no difference found'; fewer than 6 timed steps per\n"
    "plan give no verdict.\n"
    "The losses of A and B are compared at every step of every round: a relative difference\n"
    "above --loss-tolerance (0: bit-identical required) is an error. The report says whether\n"
    "they are bit-identical, and whether the final parameters (every rank saves its own) are.\n"
    "A round stops when a rank dies or when no step finishes for --stall-timeout seconds; the\n"
    "error names the plan, the round and the rank, and no output is written. The ranks' logs\n"
    "go to the run directory (a temporary one, removed after a good run, unless --run-dir).\n"
    "--rank-prefix starts rank R as 'CMD ... pipeweave ...' with {rank} and {host} (R + 1)\n"
    "replaced, e.g. on the test bed's hosts: 'scripts/netns_cluster.sh exec --name pw {host}'\n"
    "(CMD must exec the rank in place); the rounds then meet in the Redis server --store.\n"
    "With both --sim and --run, the simulated and measured ratios print side by side.\n"
    "--svg draws the simulated timelines of A and B one above the other (--svg-rank: the rank,\n"
    "default the one with the most exposed communication in A), one lane per stream it uses,\n"
    "both on one time axis. -o writes the report to OUT instead of stdout; --json\n"
    "also writes the JSON report to OUT.json.\n"
    "JSON: {\"module\", \"pipelines\": {\"a\", \"b\"}, \"sim\", \"run\"} with\n"
    "  \"sim\": {\"device\", \"a\", \"b\", \"ratio\"}: a and b hold step_time_ms, bubble_rate,\n"
    "    exposed_comm_ms {total, mp_forward, mp_backward, pp_send, pp_recv, dp, sp_forward,\n"
    "    sp_backward},\n"
    "    busy_ms_by_stream {compute, mp_comm, ..., mp_fwd_comm}, peak_bytes [per\n"
    "    rank], max_peak_bytes, fits, ranks [per rank: exposed_comm_ms, busy_ms_by_stream];\n"
    "    ratio has the same keys but ranks, each B/A (1 for 0/0, null for x/0);\n"
    "  \"run\": {\"nproc\", \"rounds\", \"steps_per_round\", \"warmup_steps_per_round\", \"a\", "
    "\"b\",\n"
    "    \"ratio\", \"losses\", \"params\"}: a and b hold median_step_ms, step_ms and losses "
    "[[per\n"
    "    round]], peak_bytes [per rank], max_peak_bytes; ratio {median_step_ms, ci95 [low,\n"
    "    high], max_peak_bytes, verdict}; losses {bit_identical, max_rel_diff, tolerance,\n"
    "    compared}; params {bit_identical, max_rel_diff, tensors, mismatch}.";

struct Plan {
  char side;  // 'A' or 'B'
  std::string pipeline;
  Module module;
};

// Runs one side's pipeline on its own copy of the module.
StatusOr<Plan> MakePlan(char side, const std::string& pipeline, const Module& module,
                        const std::shared_ptr<cost::Estimator>& estimator) {
  StatusOr<Module> planned = ab::PlanWithPipeline(module, pipeline, estimator);
  if (!planned.ok()) return planned.status().WithContext(StrCat("pipeline ", side));
  return Plan{side, pipeline, std::move(*planned)};
}

struct Settings {
  bool sim = false, run = false;
  std::string format;
  int micro_batches = 1;
  double loss_tolerance = 0;
};

StatusOr<Settings> ReadSettings(const Flags& flags) {
  Settings s;
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one module file, got ", flags.positional().size(),
                           " positional arguments");
  if (!flags.Has("a") || !flags.Has("b"))
    return InvalidArgument("pass both pipelines: -a PIPELINE -b PIPELINE");
  s.sim = flags.Has("sim");
  s.run = flags.Has("run");
  if (!s.sim && !s.run) return InvalidArgument("pass --sim, --run or both");
  s.format = flags.Get("format", "table");
  if (s.format != "table" && s.format != "json")
    return InvalidArgument("flag --format: unknown format '", s.format, "' (table, json)");
  if (flags.Has("svg") && !s.sim) return InvalidArgument("--svg draws the simulation: add --sim");
  if (s.run && !flags.Has("nproc"))
    return InvalidArgument("--run needs --nproc N (the module's number of ranks)");
  PW_ASSIGN_OR_RETURN(int64_t mb, flags.GetInt("micro-batches", 1, 1, kMaxMicroBatches));
  s.micro_batches = static_cast<int>(mb);
  PW_ASSIGN_OR_RETURN(s.loss_tolerance, flags.GetDouble("loss-tolerance", 1e-6));
  if (!(s.loss_tolerance >= 0)) return InvalidArgument("flag --loss-tolerance must be >= 0");
  return s;
}

StatusOr<AbRunSettings> ReadRunSettings(const Flags& flags, const Module& module) {
  AbRunSettings r;
  PW_ASSIGN_OR_RETURN(int64_t nproc, flags.RequireInt("nproc", 1, kMaxWorldSize));
  if (nproc != module.mesh.world_size())
    return InvalidArgument(
        "--nproc ", nproc, " does not match the module's mesh (dp=", module.mesh.dp,
        " pp=", module.mesh.pp, " mp=", module.mesh.mp, ": ", module.mesh.world_size(), " ranks)");
  r.nproc = static_cast<int>(nproc);
  PW_ASSIGN_OR_RETURN(r.steps, flags.GetInt("steps", 10));
  if (r.steps < 2) return InvalidArgument("flag --steps must be >= 2 (the first is warm-up)");
  PW_ASSIGN_OR_RETURN(int64_t rounds, flags.GetInt("rounds", 5));
  if (rounds < 1) return InvalidArgument("flag --rounds must be >= 1");
  r.rounds = static_cast<int>(rounds);
  PW_ASSIGN_OR_RETURN(int64_t seed,
                      flags.GetInt("seed", module.metadata.GetInt("seed", 1), 0, kInt64Max));
  r.seed = static_cast<uint64_t>(seed);
  PW_ASSIGN_OR_RETURN(int64_t stall, flags.GetInt("stall-timeout", 120));
  if (stall < 1) return InvalidArgument("flag --stall-timeout must be >= 1");
  r.stall_timeout = std::chrono::seconds(stall);
  r.backend = flags.Get("backend", "cpu");
  PW_ASSIGN_OR_RETURN(BackendKind backend, ParseBackendKind(r.backend));
  PW_RETURN_IF_ERROR(CheckBackendAvailable(backend));
  r.strict_events = flags.Has("strict-events");
  r.store_server = flags.Get("store");
  if (!r.store_server.empty() && r.store_server.rfind("redis://", 0) != 0)
    return InvalidArgument("flag --store: expected a redis server (redis://HOST:PORT), got '",
                           r.store_server, "'");
  std::istringstream prefix(flags.Get("rank-prefix"));  // words split at spaces
  for (std::string word; prefix >> word;) r.rank_prefix.push_back(word);
  if (!r.rank_prefix.empty() && r.store_server.empty())
    return InvalidArgument("--rank-prefix starts ranks elsewhere: give them a store they can ",
                           "reach with --store redis://HOST:PORT");
  return r;
}

// Trains both plans; the run directory is a temporary one unless --run-dir names it.
StatusOr<AbReport::Run> Measure(const Flags& flags, AbRunSettings settings, const Plan& a,
                                const Plan& b) {
  settings.run_dir = flags.Get("run-dir");
  ProgressBar bar("ab --run");
  settings.on_progress = [&](size_t done, size_t total, const std::string& detail) {
    bar.Update(done, total, detail);
  };
  return ab::CompareMeasured(a.module, b.module, std::move(settings));
}

StatusOr<std::string> DrawBoth(const Flags& flags, const Plan& a, const SimulatedPlan& sa,
                               const Plan& b, const SimulatedPlan& sb, const std::string& device) {
  PW_ASSIGN_OR_RETURN(int64_t rank, flags.GetInt("svg-rank", sa.figures.worst_exposed_rank));
  if (rank < 0 || rank >= static_cast<int64_t>(sa.figures.peak_bytes.size()))
    return InvalidArgument("flag --svg-rank: rank ", rank, " is outside [0, ",
                           sa.figures.peak_bytes.size(), ")");
  const double end = std::max(sa.result.step_time, sb.result.step_time);
  auto title = [&](const Plan& p, const SimulatedPlan& s) {
    char step[32];
    std::snprintf(step, sizeof(step), "%.3f", s.figures.step_ms);
    return StrCat(p.side, ": ", p.pipeline, " (", step, " ms step on ", device, ")");
  };
  PW_ASSIGN_OR_RETURN(std::string top, ab::RankTimelineSvg(a.module, sa, rank, title(a, sa), end));
  PW_ASSIGN_OR_RETURN(std::string bottom,
                      ab::RankTimelineSvg(b.module, sb, rank, title(b, sb), end));
  return ab::StackSvgs(top, bottom);
}

StatusOr<int> RunAb(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name :
       {"a",        "b",          "format",         "output",        "json",    "svg",
        "svg-rank", "device",     "costs",          "nproc",         "steps",   "rounds",
        "seed",     "backend",    "loss-tolerance", "stall-timeout", "run-dir", "micro-batches",
        "store",    "rank-prefix"})
    flags.Value(name);
  flags.Alias("o", "output");
  for (const char* name : {"sim", "run", "strict-events"}) flags.Switch(name);
  PW_RETURN_IF_ERROR(flags.Parse(args));
  PW_ASSIGN_OR_RETURN(Settings settings, ReadSettings(flags));

  const std::string path = flags.positional()[0];
  std::vector<std::string> inputs{path};
  if (flags.Has("costs")) inputs.push_back(flags.Get("costs"));
  OutputFiles outputs(inputs);
  for (const char* flag : {"output", "svg", "json"})
    if (flags.Has(flag)) PW_RETURN_IF_ERROR(outputs.Declare(StrCat("--", flag), flags.Get(flag)));

  // The device and the table are checked before the module is loaded (and passes run).
  std::shared_ptr<cost::Estimator> estimator;
  if (settings.sim || flags.Has("device") || flags.Has("costs")) {
    PW_ASSIGN_OR_RETURN(estimator, MakeEstimator(flags.Get("device", "cpu"), flags.Get("costs")));
  }
  PW_ASSIGN_OR_RETURN(Module module, LoadValidModule(path));
  const bool cost_passes = flags.Has("device") || flags.Has("costs");
  PW_ASSIGN_OR_RETURN(Plan a,
                      MakePlan('A', flags.Get("a"), module, cost_passes ? estimator : nullptr));
  PW_ASSIGN_OR_RETURN(Plan b,
                      MakePlan('B', flags.Get("b"), module, cost_passes ? estimator : nullptr));

  // A run that cannot start is refused before anything is simulated.
  std::optional<AbRunSettings> run;
  if (settings.run) {
    PW_ASSIGN_OR_RETURN(run, ReadRunSettings(flags, module));
    run->micro_batches = settings.micro_batches;
    run->loss_tolerance = settings.loss_tolerance;
    PW_RETURN_IF_ERROR(ab::CheckRunnable(a.module, b.module, run->strict_events));
  }

  // A CPU table must have been profiled at the kernel threads the ranks (or the reference
  // runner) will use.
  if (estimator) {
    const int processes = run ? run->nproc : a.module.plan.empty() ? 1 : a.module.mesh.world_size();
    PW_RETURN_IF_ERROR(
        CheckProfiledThreads(estimator->table(), processes, 0).WithContext(flags.Get("costs")));
    for (const Plan* plan : {&a, &b}) {
      if (std::string note = OtherScheduleNote(estimator->table(), ScheduleOf(plan->module));
          !note.empty())
        std::fprintf(stderr, "%s (plan %c): %s\n", flags.Get("costs").c_str(), plan->side,
                     note.c_str());
    }
  }

  AbReport report;
  report.module_path = path;
  report.pipeline_a = a.pipeline;
  report.pipeline_b = b.pipeline;
  std::string svg;
  if (settings.sim) {
    ab::SimulateOptions options;
    options.estimator = estimator;
    options.micro_batches = settings.micro_batches;
    options.timeline = flags.Has("svg");
    PW_ASSIGN_OR_RETURN(ab::SimulatedComparison sim,
                        ab::CompareSimulated(a.module, b.module, options));
    report.sim = sim.report;
    if (options.timeline) {
      PW_ASSIGN_OR_RETURN(svg, DrawBoth(flags, a, sim.a, b, sim.b, report.sim->device));
    }
  }
  if (run) {
    PW_ASSIGN_OR_RETURN(report.run, Measure(flags, *run, a, b));
  }

  // Every check has passed: only now is anything written.
  if (!svg.empty()) PW_RETURN_IF_ERROR(outputs.Write(flags.Get("svg"), svg));
  if (flags.Has("json"))
    PW_RETURN_IF_ERROR(outputs.Write(flags.Get("json"), ab::AbReportJson(report)));
  std::string text =
      settings.format == "json" ? ab::AbReportJson(report) : ab::AbReportTable(report);
  if (flags.Has("output")) PW_RETURN_IF_ERROR(outputs.Write(flags.Get("output"), text));
  PW_RETURN_IF_ERROR(outputs.Commit());
  if (flags.Has("output")) return 0;
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(ab, "ab", "compare two pass pipelines on one module (simulated and measured)",
                    kUsage, RunAb);

}  // namespace pw::tools
