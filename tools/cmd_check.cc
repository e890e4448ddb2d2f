// `pipeweave check FILE`: runs the static schedule checker on a PyTorch schedule CSV or on
// the plan of a module file (.pbtxt / .pb).

#include <iostream>

#include "ir/file_util.h"
#include "ir/plan_actions.h"
#include "ir/proto_io.h"
#include "ir/schedule_csv.h"
#include "passes/pipeline/schedule_checker.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/module_validation.h"

namespace pw::tools {
namespace {

StatusOr<ActionSchedule> LoadSchedule(const std::string& path) {
  if (FileExtension(path) == ".csv") return ReadScheduleCsv(path);
  PW_ASSIGN_OR_RETURN(Module module, LoadValidModule(path));
  if (module.plan.empty())
    return FailedPrecondition(path, " has no plan (run the schedule pass first)");
  StatusOr<ActionSchedule> schedule = PlanToActionSchedule(module.plan);
  if (!schedule.ok()) return schedule.status().WithContext(path);
  return schedule;
}

StatusOr<int> RunCheck(const std::vector<std::string>& args) {
  Flags flags;
  flags.Value("comm").Value("mem-limit").Value("w-mem").Value("micro-batches");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1)
    return InvalidArgument("expected exactly one schedule (.csv) or module (.pbtxt/.pb) file, got ",
                           flags.positional().size());
  pipeline::CheckOptions options;
  PW_ASSIGN_OR_RETURN(options.semantics, ParseCommSemantics(flags.Get("comm", "eager")));
  PW_ASSIGN_OR_RETURN(options.mem_limit, flags.GetDouble("mem-limit", 0));
  PW_ASSIGN_OR_RETURN(options.w_mem, flags.GetDouble("w-mem", 0.5, 0, 1));
  PW_ASSIGN_OR_RETURN(int64_t expected_mbs, flags.GetInt("micro-batches", 0));

  const std::string& path = flags.positional()[0];
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, LoadSchedule(path));
  if (expected_mbs > 0 && schedule.num_micro_batches != expected_mbs)
    return FailedPrecondition(path, ": schedule runs ", schedule.num_micro_batches,
                              " micro-batches, expected ", expected_mbs);
  Status checked = pipeline::CheckSchedule(schedule, options);
  if (!checked.ok()) return checked.WithContext(path);
  std::cout << "ok: " << path << ": " << schedule.num_ranks() << " ranks, " << schedule.num_stages
            << " stages, " << schedule.num_micro_batches << " micro-batches, "
            << schedule.num_actions() << " actions"
            << (schedule.HasComms() ? " with send/recv" : " (compute only)")
            << "; deadlock-free under " << CommSemanticsName(options.semantics) << " semantics\n";
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(check, "check", "check a pipeline schedule (CSV) or a module's plan",
                    "pipeweave check FILE [--comm eager|rendezvous] [--mem-limit X] "
                    "[--w-mem Y] [--micro-batches M]\n"
                    "  FILE is a PyTorch schedule CSV or a module (.pbtxt/.pb) with a plan. "
                    "Checks placement,\n"
                    "  one F and one B (or I and W) per stage and micro-batch in order, "
                    "matching send/recv,\n"
                    "  memory (M_B units) and deadlock freedom; a deadlock names its cycle of "
                    "(rank, action).",
                    RunCheck);

}  // namespace pw::tools
