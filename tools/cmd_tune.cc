// `pipeweave tune MODULE... --ranks N`: searches the plan choices of modules with the
// simulators and prints the best few as pass pipelines (search/plan_search.h).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "ir/proto_io.h"
#include "models/model_recipe.h"
#include "passes/cost_inputs.h"
#include "search/plan_search.h"
#include "search/tune_shapes.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "viz/chrome_trace.h"

namespace pw::tools {
namespace {

using search::ActionLevelBest;
using search::MeshSplits;
using search::RankedShape;
using search::ShapeChoice;
using search::TunedPlan;
using search::TuneOptions;
using search::TuneResult;

constexpr const char* kUsage =
    "pipeweave tune MODULE [MODULE...] --ranks N [--device cpu|h100|a100|SPEC_FILE (cpu)]\n"
    "           [--costs COSTS] [--global-batch G | --micro-batches M (4 x pp)]\n"
    "           [--mem-limit GB] [--top K (5)] [--shapes on|off (on)] [--splits on|off (off)]\n"
    "           [--format table|json]\n"
    "Searches, with the simulators, the plan choices a user would otherwise try by hand on\n"
    "unplanned training modules (their mesh, stages, chunk placement and micro-batch size as\n"
    "build-model made them): the schedule kind (each planned and pruned with the\n"
    "action-level simulator), then the p2p order of insert-p2p and the overlap passes that\n"
    "are registered (assign-streams, overlap-column-parallel-backward, overlap-1f1b,\n"
    "insert-events, order-comm) on the op-level simulator; on a module amp gave fp16 loss\n"
    "scaling (pp > 1), each kind also with post-validate (the overflow check a step late).\n"
    "Prints the best K plans as pipelines that 'pipeweave opt -p' accepts verbatim on their\n"
    "module, each with its predicted step time (the steady step of two steps back to back,\n"
    "as 'sim --steps 2' prints it), bubble rate (over both steps), largest peak memory of a\n"
    "rank and speed-up over plain 1f1b (on the first module). --ranks must be each module's\n"
    "world (mp x pp x dp).\n"
    "--global-batch G (samples per step) gives each module G / (dp x its micro-batch size)\n"
    "micro-batches; several modules (e.g. built with other --vpp, --placement or\n"
    "--micro-batch-size) are compared at the same global batch, which they then need.\n"
    "Plans that do not fit the device's memory (sim's check: every rank's peak and the\n"
    "runtime's reservation) are dropped; --mem-limit GB holds every rank to GB GiB instead.\n"
    "Progress goes to stderr.\n"
    "With one module that records how build-model made it and --global-batch, tune also\n"
    "builds the model again in-process with every vpp that splits a rank's layers evenly\n"
    "(up to 8), the V placement at vpp 2 and every micro-batch size that gives at least pp\n"
    "micro-batches; ranks those shapes by their best schedule kind on the action-level\n"
    "simulator and searches the best two fully beside the module as built. Their plans\n"
    "name the shape and the build-model arguments that build it (--shapes off: the module\n"
    "as built only).\n"
    "--splits on (one module that records its recipe, and --global-batch) also builds the\n"
    "model on every other dp x pp x mp split of the N ranks (vpp 1, even stages, the built\n"
    "micro-batch size, at least pp micro-batches per replica) and searches each on the\n"
    "op-level simulator, which prices the dp gradient all-reduce (across nodes where a dp\n"
    "group spans them) and each split's memory; a plan on a split names it and its\n"
    "build-model arguments.";

StatusOr<int> MicroBatchSize(const Module& module) {
  for (const std::string& input : ModuleInputs(module))
    if (const Var* v = module.FindVar(input))
      if (!v->shape.empty() && v->shape[0] > 0) return static_cast<int>(v->shape[0]);
  return FailedPrecondition("module '", module.name,
                            "' declares no input to read its micro-batch size from");
}

// One module searched: its staging as built and the micro-batches its step runs.
struct Variant {
  std::string path;         // the file, or the shape tune built it with
  std::string build_model;  // build-model's arguments for a module tune built; else empty
  Module module;
  int micro_batches = 0;
  TuneResult result;
};

// A reported plan and the module it runs on.
struct Ranked {
  const Variant* variant;
  const TunedPlan* plan;
};

struct Report {
  std::vector<Variant> variants;
  std::vector<RankedShape> shapes;          // fastest first; empty when no shapes were tried
  std::optional<ActionLevelBest> as_built;  // the module as built, when shapes were tried
  std::vector<Ranked> best;                 // fastest first
  const TunedPlan* baseline = nullptr;
  std::string device;
  double seconds = 0;
};

void AppendPlanJson(std::string& out, const Ranked& r, double baseline_ms) {
  out += "{\"module\": ";
  AppendJsonString(out, r.variant->path);
  out += StrCat(", \"micro_batches\": ", r.variant->micro_batches, ", \"build_model\": ");
  if (r.variant->build_model.empty())
    out += "null";
  else
    AppendJsonString(out, r.variant->build_model);
  out += ", \"pipeline\": ";
  AppendJsonString(out, r.plan->pipeline);
  out += ", \"step_time_ms\": ";
  AppendJsonNumber(out, r.plan->step_ms);
  out += ", \"bubble_rate\": ";
  AppendJsonNumber(out, r.plan->bubble_rate);
  out += StrCat(", \"peak_bytes\": ", r.plan->peak_bytes,
                ", \"fits\": ", r.plan->fits ? "true" : "false", ", \"speedup\": ");
  AppendJsonNumber(out, baseline_ms / r.plan->step_ms);
  out += "}";
}

void PrintJson(const Report& report) {
  const double base_ms = report.baseline->step_ms;
  std::string out = "{\"ranks\": ";
  out += StrCat(report.variants[0].module.mesh.world_size(), ", \"device\": ");
  AppendJsonString(out, report.device);
  out += ", \"modules\": [";
  int planned = 0, simulated = 0, refused = 0, over_memory = 0;
  for (size_t i = 0; i < report.variants.size(); ++i) {
    const Variant& v = report.variants[i];
    const Mesh& mesh = v.module.mesh;
    if (i) out += ", ";
    out += "{\"path\": ";
    AppendJsonString(out, v.path);
    out += StrCat(", \"mp\": ", mesh.mp, ", \"pp\": ", mesh.pp, ", \"dp\": ", mesh.dp,
                  ", \"vpp\": ", mesh.vpp, ", \"micro_batches\": ", v.micro_batches, "}");
    planned += v.result.planned;
    simulated += v.result.simulated;
    refused += v.result.refused;
    over_memory += v.result.over_memory;
  }
  out += "], \"baseline\": ";
  AppendPlanJson(out, Ranked{&report.variants[0], report.baseline}, base_ms);
  out += ", \"plans\": [";
  for (size_t i = 0; i < report.best.size(); ++i) {
    if (i) out += ", ";
    AppendPlanJson(out, report.best[i], base_ms);
  }
  out += "], \"shapes\": [";
  for (size_t i = 0; i < report.shapes.size(); ++i) {
    const RankedShape& shape = report.shapes[i];
    if (i) out += ", ";
    out += "{\"shape\": ";
    AppendJsonString(out, shape.choice.label);
    out += StrCat(", \"micro_batches\": ", shape.choice.micro_batches, ", \"build_model\": ");
    AppendJsonString(out, shape.choice.build_model);
    out += ", \"best_kind\": ";
    AppendJsonString(out, shape.best.kind);
    out += ", \"action_makespan_ms\": ";
    AppendJsonNumber(out, shape.best.makespan_ms);
    out += "}";
  }
  out += StrCat("], \"searched\": {\"schedules\": ", planned, ", \"simulated\": ", simulated,
                ", \"refused\": ", refused, ", \"over_memory\": ", over_memory, "}, \"seconds\": ");
  AppendJsonNumber(out, report.seconds);
  out += "}\n";
  std::fputs(out.c_str(), stdout);
}

void PrintTable(const Report& report) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const bool several = report.variants.size() > 1;
  int planned = 0, simulated = 0, refused = 0, over_memory = 0;
  for (const Variant& v : report.variants) {
    const Mesh& m = v.module.mesh;
    std::printf("%s: %d ranks (mp %d x pp %d x dp %d, vpp %d), %d micro-batches, device %s\n",
                v.path.c_str(), m.world_size(), m.mp, m.pp, m.dp, m.vpp, v.micro_batches,
                report.device.c_str());
    planned += v.result.planned;
    simulated += v.result.simulated;
    refused += v.result.refused;
    over_memory += v.result.over_memory;
  }
  const TunedPlan& base = *report.baseline;
  std::printf("plain 1f1b%s: %.3f ms, bubble %.3f, peak %.2f GiB%s\n\n",
              several ? (" on " + report.variants[0].path).c_str() : "", base.step_ms,
              base.bubble_rate, base.peak_bytes / gib, base.fits ? "" : " (does not fit)");
  if (report.best.empty())
    std::printf(
        "no plan fits the memory limit (%d over it): recompute activations, or more\n"
        "pipeline or tensor parallelism\n",
        over_memory);
  std::printf("%-4s %12s %8s %7s %9s  %s\n", "rank", "step_ms", "speedup", "bubble", "peak_GiB",
              several ? "module: pipeline" : "pipeline");
  for (size_t i = 0; i < report.best.size(); ++i) {
    const TunedPlan& p = *report.best[i].plan;
    const Variant& v = *report.best[i].variant;
    std::printf("%-4zu %12.3f %7.3fx %7.3f %9.2f  %s%s\n", i + 1, p.step_ms,
                base.step_ms / p.step_ms, p.bubble_rate, p.peak_bytes / gib,
                several ? (v.path + ": ").c_str() : "", p.pipeline.c_str());
    if (!v.build_model.empty())
      std::printf("%-45s  module: pipeweave build-model %s -o MODULE.pb\n", "",
                  v.build_model.c_str());
  }
  if (report.as_built) {
    std::printf(
        "\nshapes by the action-level simulator (best schedule kind, step ms): as built "
        "%.3f (%s)",
        report.as_built->makespan_ms, report.as_built->kind.c_str());
    for (size_t i = 0; i < report.shapes.size() && i < 4; ++i)
      std::printf("; %s %.3f (%s)", report.shapes[i].choice.label.c_str(),
                  report.shapes[i].best.makespan_ms, report.shapes[i].best.kind.c_str());
    std::printf("%s\n", report.shapes.size() > 4 ? "; ..." : "");
  }
  std::printf(
      "\nsearched %s%d schedule kinds (action-level), %d pipelines (op-level); %d refused by "
      "a pass, %d over the memory limit; %.2f s\n",
      report.as_built ? StrCat(report.shapes.size() + 1, " shapes, ").c_str() : "", planned,
      simulated, refused, over_memory, report.seconds);
}

// The module at `path`, checked against --ranks, with the micro-batches its step runs.
StatusOr<Variant> LoadVariant(const std::string& path, int64_t ranks, const Flags& flags) {
  Variant v;
  v.path = path;
  PW_ASSIGN_OR_RETURN(v.module, LoadModule(path));
  const Mesh& mesh = v.module.mesh;
  if (ranks != mesh.world_size())
    return InvalidArgument("--ranks ", ranks, ": ", path, " is built for ", mesh.world_size(),
                           " ranks (mp ", mesh.mp, " x pp ", mesh.pp, " x dp ", mesh.dp,
                           "); build it for ", ranks, " with pipeweave build-model");
  int64_t micro_batches = 4 * mesh.pp;
  if (flags.Has("micro-batches")) {
    PW_ASSIGN_OR_RETURN(micro_batches, flags.GetInt("micro-batches", 0));
    if (micro_batches < 1) return InvalidArgument("flag --micro-batches must be >= 1");
  }
  if (flags.Has("global-batch")) {
    PW_ASSIGN_OR_RETURN(int64_t global, flags.GetInt("global-batch", 0));
    PW_ASSIGN_OR_RETURN(int b, MicroBatchSize(v.module));
    if (global < 1 || global % (static_cast<int64_t>(mesh.dp) * b) != 0)
      return InvalidArgument("flag --global-batch ", global, " is not a positive multiple of dp ",
                             mesh.dp, " x micro-batch size ", b, " (", path, ")");
    micro_batches = global / (static_cast<int64_t>(mesh.dp) * b);
  }
  v.micro_batches = static_cast<int>(micro_batches);
  return v;
}

// The shapes other than the module as built, ranked by the action-level simulator; the
// best `keep` join the report's variants. Nothing when the module records no recipe.
Status AddShapes(Report& report, std::shared_ptr<const cost::Estimator> estimator,
                 int64_t global_batch, size_t keep) {
  const Variant& built = report.variants[0];
  StatusOr<models::ModelRecipe> recipe = models::ReadModelRecipe(built.module);
  if (!recipe.ok()) {
    std::fprintf(stderr, "tune: %s; searching the module as built only\n",
                 recipe.status().message().c_str());
    return OkStatus();
  }
  PW_ASSIGN_OR_RETURN(
      search::ShapeRanking ranking,
      search::RankShapes(*recipe, built.module, built.micro_batches, estimator, global_batch));
  report.as_built = ranking.as_built;
  report.shapes = std::move(ranking.shapes);
  for (size_t k = 0; k < report.shapes.size() && k < keep; ++k) {
    RankedShape& shape = report.shapes[k];
    Variant v;
    v.path = shape.choice.label;
    v.build_model = shape.choice.build_model;
    v.module = std::move(shape.module);  // the report keeps the choice and its rank only
    v.micro_batches = shape.choice.micro_batches;
    report.variants.push_back(std::move(v));
  }
  std::fprintf(stderr,
               "tune: %zu other shapes ranked by the action-level simulator; the best %zu "
               "searched\n",
               report.shapes.size(), std::min(keep, report.shapes.size()));
  return OkStatus();
}

// Every other dp x pp x mp split of the module's ranks joins the report's variants; each is
// searched narrowly on the op-level simulator (its best schedule kinds only).
Status AddSplits(Report& report, int64_t global_batch) {
  // Read before the variants grow: their vector moves them.
  const Module& built = report.variants[0].module;
  const int ranks = built.mesh.world_size();
  PW_ASSIGN_OR_RETURN(models::ModelRecipe recipe, models::ReadModelRecipe(built));
  // A mesh set by hand on a built module (dp is not always recorded by older builds).
  (recipe.model == "gpt" ? recipe.gpt.dp : recipe.llama.dp) = built.mesh.dp;
  int searched = 0;
  for (ShapeChoice& choice : MeshSplits(recipe, global_batch)) {
    StatusOr<Module> module = models::BuildFromRecipe(choice.recipe);
    if (!module.ok()) continue;
    Variant v;
    v.path = choice.label;
    v.build_model = choice.build_model;
    v.module = std::move(module).value();
    v.micro_batches = choice.micro_batches;
    report.variants.push_back(std::move(v));
    ++searched;
  }
  std::fprintf(stderr, "tune: %d other dp x pp x mp splits of %d ranks searched\n", searched,
               ranks);
  return OkStatus();
}

StatusOr<int> RunTune(const std::vector<std::string>& args) {
  const auto start = std::chrono::steady_clock::now();
  Flags flags;
  for (const char* name : {"ranks", "device", "costs", "global-batch", "micro-batches", "mem-limit",
                           "top", "shapes", "splits", "format"})
    flags.Value(name);
  PW_RETURN_IF_ERROR(flags.Parse(args));
  const std::vector<std::string>& paths = flags.positional();
  if (paths.empty()) return InvalidArgument("expected a module file");
  if (!flags.Has("ranks")) return InvalidArgument("flag --ranks N is required");
  PW_ASSIGN_OR_RETURN(int64_t ranks, flags.GetInt("ranks", 0));
  if (ranks < 1) return InvalidArgument("flag --ranks must be >= 1");
  const std::string format = flags.Get("format", "table");
  if (format != "table" && format != "json")
    return InvalidArgument("flag --format: unknown format '", format, "' (table, json)");
  if (flags.Has("global-batch") && flags.Has("micro-batches"))
    return InvalidArgument("give --global-batch or --micro-batches, not both");
  if (paths.size() > 1 && !flags.Has("global-batch"))
    return InvalidArgument(paths.size(),
                           " modules are compared at one global batch: give --global-batch G");
  PW_ASSIGN_OR_RETURN(int64_t mem_limit, flags.GetGibAsBytes("mem-limit"));
  PW_ASSIGN_OR_RETURN(int64_t top, flags.GetInt("top", 5));
  const std::string shapes = flags.Get("shapes", "on");
  if (shapes != "on" && shapes != "off")
    return InvalidArgument("flag --shapes takes on or off, got '", shapes, "'");
  if (top < 1) return InvalidArgument("flag --top must be >= 1");
  const std::string splits = flags.Get("splits", "off");
  if (splits != "on" && splits != "off")
    return InvalidArgument("flag --splits takes on or off, got '", splits, "'");
  if (splits == "on" && (paths.size() != 1 || !flags.Has("global-batch")))
    return InvalidArgument(
        "flag --splits on searches one module's dp x pp x mp splits at one global batch: give "
        "one module and --global-batch G");
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      MakeEstimator(flags.Get("device", "cpu"), flags.Get("costs")));

  Report report;
  for (const std::string& path : paths) {
    PW_ASSIGN_OR_RETURN(Variant v, LoadVariant(path, ranks, flags));
    report.variants.push_back(std::move(v));
  }
  if (report.variants[0].module.mesh.vpp > 1)
    return FailedPrecondition(paths[0], ": plain 1f1b does not plan on it (vpp ",
                              report.variants[0].module.mesh.vpp,
                              "); put first a module it runs on, the reference of the speed-ups");
  if (paths.size() == 1 && flags.Has("global-batch") && shapes == "on") {
    PW_ASSIGN_OR_RETURN(int64_t global, flags.GetInt("global-batch", 0));
    PW_RETURN_IF_ERROR(AddShapes(report, estimator, global, 2).WithContext(paths[0]));
  }
  if (splits == "on") {
    PW_ASSIGN_OR_RETURN(int64_t global, flags.GetInt("global-batch", 0));
    PW_RETURN_IF_ERROR(AddSplits(report, global).WithContext(paths[0]));
  }
  for (Variant& v : report.variants) {
    TuneOptions options;
    options.estimator = estimator;
    options.micro_batches = v.micro_batches;
    options.mem_limit_bytes = mem_limit;
    options.top = static_cast<int>(top);
    if (!v.build_model.empty()) {
      // A shape tune built: its best kinds only, each step narrower than on the module as
      // built, so that the shapes add seconds, not minutes.
      options.action_keep = 2;
      options.order_kinds = 1;
      options.overlap_bases = 1;
    }
    options.progress = [&](const std::string& line) {
      std::fprintf(stderr, "%s%s\n", report.variants.size() > 1 ? (v.path + ": ").c_str() : "",
                   line.c_str());
    };
    StatusOr<TuneResult> result = search::Tune(v.module, options);
    if (!result.ok()) return result.status().WithContext(v.path);
    v.result = std::move(result).value();
    if (!report.variants[0].result.baseline)
      return FailedPrecondition(paths[0], ": plain 1f1b does not plan on it (vpp ",
                                v.module.mesh.vpp,
                                "); put first a module it runs on, the reference of the speed-ups");
    for (const TunedPlan& p : v.result.best) report.best.push_back(Ranked{&v, &p});
  }
  std::stable_sort(report.best.begin(), report.best.end(), [](const Ranked& a, const Ranked& b) {
    return a.plan->step_ms < b.plan->step_ms;
  });
  if (static_cast<int64_t>(report.best.size()) > top) report.best.resize(top);
  report.baseline = &*report.variants[0].result.baseline;
  report.device = estimator->device().name();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (format == "json")
    PrintJson(report);
  else
    PrintTable(report);
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(tune, "tune", "search plan choices with the simulators", kUsage, RunTune);

}  // namespace pw::tools
