// `pipeweave inspect FILE`: a summary of a module — programs, ops by role and stage,
// parameters, FLOPs per stage, and the plan when there is one. `pipeweave inspect DIR`:
// a checkpoint's manifest (tools/inspect_checkpoint.h).

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "cost_model/stage_flops.h"
#include "ir/proto_io.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/inspect_checkpoint.h"
#include "tools/module_validation.h"

namespace pw::tools {
namespace {

std::string HumanCount(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (v >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), i ? "%.2f %s%s" : "%.0f %s%s", v, prefixes[i], unit);
  return buf;
}

std::string HumanBytes(double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), i ? "%.2f %s" : "%.0f %s", v, units[i]);
  return buf;
}

struct StageSummary {
  std::map<OpRole, int64_t> ops_by_role;
  int64_t params = 0;
  int64_t param_bytes = 0;
  double flops_by_role[6] = {0, 0, 0, 0, 0, 0};
};

void SummarizeProgram(const Program& program, const OpRegistry& registry) {
  std::map<int, StageSummary> stages;
  for (const Var& v : program.vars()) {
    if (!v.is_parameter) continue;
    StageSummary& s = stages[v.stage];
    s.params += v.num_elements();
    s.param_bytes += v.num_bytes();
  }
  for (const Op& op : program.ops()) {
    StageSummary& s = stages[op.stage];
    ++s.ops_by_role[op.role];
    auto flops = OpFlops(program, op, registry);
    if (flops.ok()) s.flops_by_role[static_cast<int>(op.role)] += *flops;
  }

  std::printf("program '%s': %zu ops, %zu vars", program.name().c_str(), program.ops().size(),
              program.vars().size());
  if (!program.info().kind.empty())
    std::printf(" [%s, stage %d, chunk %d]", program.info().kind.c_str(), program.info().stage,
                program.info().chunk);
  std::printf("\n");
  std::printf("  %-6s %8s %8s %8s %8s %8s %14s %14s %14s\n", "stage", "fwd", "loss", "bwd", "opt",
              "comm", "params", "fwd FLOPs", "bwd FLOPs");
  StageSummary total;
  for (const auto& [stage, s] : stages) {
    auto count = [&](OpRole r) {
      auto it = s.ops_by_role.find(r);
      return it == s.ops_by_role.end() ? int64_t{0} : it->second;
    };
    double fwd = s.flops_by_role[static_cast<int>(OpRole::kForward)] +
                 s.flops_by_role[static_cast<int>(OpRole::kLoss)];
    double bwd = s.flops_by_role[static_cast<int>(OpRole::kBackward)];
    std::printf("  %-6s %8lld %8lld %8lld %8lld %8lld %14s %14s %14s\n",
                stage < 0 ? "-" : std::to_string(stage).c_str(),
                static_cast<long long>(count(OpRole::kForward)),
                static_cast<long long>(count(OpRole::kLoss)),
                static_cast<long long>(count(OpRole::kBackward)),
                static_cast<long long>(count(OpRole::kOptimize)),
                static_cast<long long>(count(OpRole::kCommunication)),
                HumanCount(static_cast<double>(s.params), "").c_str(),
                HumanCount(fwd, "FLOP").c_str(), HumanCount(bwd, "FLOP").c_str());
    total.params += s.params;
    total.param_bytes += s.param_bytes;
  }
  std::printf("  parameters: %s (%s)\n", HumanCount(static_cast<double>(total.params), "").c_str(),
              HumanBytes(static_cast<double>(total.param_bytes)).c_str());
}

StatusOr<int> RunInspect(const std::vector<std::string>& args) {
  Flags flags;
  flags.Switch("no-verify");
  flags.Switch("vars");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1) return InvalidArgument("expected one module file");
  const std::string& path = flags.positional()[0];
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return InspectCheckpoint(path, flags.Has("vars"));
  if (flags.Has("vars"))
    return InvalidArgument("--vars lists a checkpoint's vars: pass its folder");
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(path));
  const OpRegistry& registry = ops::Registry();
  if (!flags.Has("no-verify")) PW_RETURN_IF_ERROR(ValidateModule(module).WithContext(path));

  const Mesh& m = module.mesh;
  std::printf("module '%s': %zu program(s), mesh dp=%d pp=%d mp=%d vpp=%d (world size %d)\n",
              module.name.c_str(), module.programs().size(), m.dp, m.pp, m.mp, m.vpp,
              m.world_size());
  for (const auto& [key, value] : module.metadata.items())
    std::printf("  %s = %s\n", key.c_str(), AttributeToString(value).c_str());
  for (const Program& p : module.programs()) SummarizeProgram(p, registry);
  if (!module.plan.empty()) {
    size_t jobs = 0;
    for (const RankPlan& r : module.plan.ranks) jobs += r.jobs.size();
    std::printf("plan: schedule '%s', %d micro-batches, %d stages, %zu ranks, %zu jobs\n",
                module.plan.schedule.c_str(), module.plan.num_micro_batches, module.plan.num_stages,
                module.plan.ranks.size(), jobs);
  }
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(inspect, "inspect",
                    "summarise a module (ops by role and stage, parameters, FLOPs) or a checkpoint",
                    "pipeweave inspect FILE [--no-verify]\n"
                    "   or: pipeweave inspect DIR [--vars]\n"
                    "A checkpoint folder (or a folder of them: the latest) prints its step, the\n"
                    "layout that wrote it and each rank's file, every size and checksum verified;\n"
                    "--vars lists how each var is cut over the ranks.",
                    RunInspect);

}  // namespace pw::tools
