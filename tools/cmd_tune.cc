// `pipeweave tune MODULE --ranks N`: searches the plan choices of a module with the
// simulators and prints the best few as pass pipelines (tools/plan_search.h).

#include <chrono>
#include <cstdio>

#include "cost_model/chrome_trace.h"
#include "ir/proto_io.h"
#include "tools/command.h"
#include "tools/cost_inputs.h"
#include "tools/flags.h"
#include "tools/plan_search.h"

namespace pw::tools {
namespace {

constexpr const char* kUsage =
    "pipeweave tune MODULE --ranks N [--device cpu|h100|a100|SPEC_FILE (cpu)] [--costs COSTS]\n"
    "           [--global-batch G | --micro-batches M (4 x pp)] [--mem-limit GB] [--top K (5)]\n"
    "           [--format table|json]\n"
    "Searches, with the simulators, the plan choices a user would otherwise try by hand on\n"
    "an unplanned training module (its mesh, stages and micro-batch size as built by\n"
    "build-model): the schedule kind (each planned and pruned with the action-level\n"
    "simulator), then the p2p order of insert-p2p and the overlap passes that are\n"
    "registered (assign-streams, overlap-column-parallel-backward, overlap-1f1b,\n"
    "insert-events, order-comm) on the op-level simulator. Prints the best K plans as\n"
    "pipelines that 'pipeweave opt -p' accepts verbatim, each with its predicted step time,\n"
    "bubble rate, largest peak memory of a rank and speed-up over plain 1f1b. --ranks must\n"
    "be the module's world (mp x pp x dp). --global-batch G (samples per step) gives\n"
    "G / (dp x micro-batch size) micro-batches. --mem-limit drops plans whose largest rank\n"
    "holds more than GB GiB. Progress goes to stderr.";

StatusOr<int> MicroBatchSize(const Module& module) {
  for (const std::string& input : ModuleInputs(module))
    if (const Var* v = module.FindVar(input))
      if (!v->shape.empty() && v->shape[0] > 0) return static_cast<int>(v->shape[0]);
  return FailedPrecondition("module '", module.name,
                            "' declares no input to read its micro-batch size from");
}

void PrintJson(const TuneResult& r, const std::string& path, const Module& m, int micro_batches,
               const std::string& device, double seconds) {
  auto plan = [&](std::string& out, const TunedPlan& p) {
    out += "{\"pipeline\": ";
    AppendJsonString(out, p.pipeline);
    out += ", \"step_time_ms\": ";
    AppendJsonNumber(out, p.step_ms);
    out += ", \"bubble_rate\": ";
    AppendJsonNumber(out, p.bubble_rate);
    out += StrCat(", \"peak_bytes\": ", p.peak_bytes, ", \"speedup\": ");
    AppendJsonNumber(out, r.baseline.step_ms / p.step_ms);
    out += "}";
  };
  std::string out = "{\"module\": ";
  AppendJsonString(out, path);
  out +=
      StrCat(", \"ranks\": ", m.mesh.world_size(), ", \"mp\": ", m.mesh.mp, ", \"pp\": ", m.mesh.pp,
             ", \"dp\": ", m.mesh.dp, ", \"micro_batches\": ", micro_batches, ", \"device\": ");
  AppendJsonString(out, device);
  out += ", \"baseline\": ";
  plan(out, r.baseline);
  out += ", \"plans\": [";
  for (size_t i = 0; i < r.best.size(); ++i) {
    if (i) out += ", ";
    plan(out, r.best[i]);
  }
  out += StrCat("], \"searched\": {\"schedules\": ", r.planned, ", \"simulated\": ", r.simulated,
                ", \"refused\": ", r.refused, ", \"over_memory\": ", r.over_memory,
                "}, \"seconds\": ");
  AppendJsonNumber(out, seconds);
  out += "}\n";
  std::fputs(out.c_str(), stdout);
}

void PrintTable(const TuneResult& r, const std::string& path, const Module& m, int micro_batches,
                const std::string& device, double seconds) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::printf("%s: %d ranks (mp %d x pp %d x dp %d), %d micro-batches, device %s\n", path.c_str(),
              m.mesh.world_size(), m.mesh.mp, m.mesh.pp, m.mesh.dp, micro_batches, device.c_str());
  std::printf("plain 1f1b: %.3f ms, bubble %.3f, peak %.2f GiB\n\n", r.baseline.step_ms,
              r.baseline.bubble_rate, r.baseline.peak_bytes / gib);
  std::printf("%-4s %12s %8s %7s %9s  %s\n", "rank", "step_ms", "speedup", "bubble", "peak_GiB",
              "pipeline");
  for (size_t i = 0; i < r.best.size(); ++i) {
    const TunedPlan& p = r.best[i];
    std::printf("%-4zu %12.3f %7.3fx %7.3f %9.2f  %s\n", i + 1, p.step_ms,
                r.baseline.step_ms / p.step_ms, p.bubble_rate, p.peak_bytes / gib,
                p.pipeline.c_str());
  }
  std::printf(
      "\nsearched %d schedule kinds (action-level), %d pipelines (op-level); %d refused "
      "by a pass, %d over the memory limit; %.2f s\n",
      r.planned, r.simulated, r.refused, r.over_memory, seconds);
}

StatusOr<int> RunTune(const std::vector<std::string>& args) {
  const auto start = std::chrono::steady_clock::now();
  Flags flags;
  for (const char* name :
       {"ranks", "device", "costs", "global-batch", "micro-batches", "mem-limit", "top", "format"})
    flags.Value(name);
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one module file, got ", flags.positional().size(),
                           " positional arguments");
  if (!flags.Has("ranks")) return InvalidArgument("flag --ranks N is required");
  PW_ASSIGN_OR_RETURN(int64_t ranks, flags.GetInt("ranks", 0));
  if (ranks < 1) return InvalidArgument("flag --ranks must be >= 1");
  const std::string format = flags.Get("format", "table");
  if (format != "table" && format != "json")
    return InvalidArgument("flag --format: unknown format '", format, "' (table, json)");
  if (flags.Has("global-batch") && flags.Has("micro-batches"))
    return InvalidArgument("give --global-batch or --micro-batches, not both");
  PW_ASSIGN_OR_RETURN(double mem_gib, flags.GetDouble("mem-limit", 0));
  if (flags.Has("mem-limit") && !(mem_gib > 0))
    return InvalidArgument("flag --mem-limit must be > 0 (GiB per rank)");
  PW_ASSIGN_OR_RETURN(int64_t top, flags.GetInt("top", 5));
  if (top < 1) return InvalidArgument("flag --top must be >= 1");
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      MakeEstimator(flags.Get("device", "cpu"), flags.Get("costs")));

  const std::string path = flags.positional()[0];
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(path));
  const Mesh& mesh = module.mesh;
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
    PW_ASSIGN_OR_RETURN(int b, MicroBatchSize(module));
    if (global < 1 || global % (static_cast<int64_t>(mesh.dp) * b) != 0)
      return InvalidArgument("flag --global-batch ", global, " is not a positive multiple of dp ",
                             mesh.dp, " x micro-batch size ", b);
    micro_batches = global / (static_cast<int64_t>(mesh.dp) * b);
  }

  TuneOptions options;
  options.micro_batches = static_cast<int>(micro_batches);
  options.mem_limit_bytes = static_cast<int64_t>(mem_gib * 1024.0 * 1024.0 * 1024.0);
  options.top = static_cast<int>(top);
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  StatusOr<TuneResult> result = TunePlan(module, estimator, options);
  if (!result.ok()) return result.status().WithContext(path);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string device = estimator->device().name();
  if (format == "json")
    PrintJson(*result, path, module, options.micro_batches, device, seconds);
  else
    PrintTable(*result, path, module, options.micro_batches, device, seconds);
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(tune, "tune", "search plan choices with the simulators", kUsage, RunTune);

}  // namespace pw::tools
