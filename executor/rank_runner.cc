#include "executor/rank_runner.h"

#include <chrono>
#include <map>

#include "executor/backend_factory.h"
#include "executor/interpreter.h"
#include "executor/tensor_file.h"
#include "ir/post_validation.h"
#include "ir/thread_cpu_clock.h"

namespace pw {
namespace {

double MsSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
      .count();
}

// Sets the rank's vars from the checkpoint to resume; returns the steps it had trained.
StatusOr<int64_t> Resume(Interpreter& interp, const CheckpointManifest& header,
                         const RankVars& vars, const RankRunOptions& options) {
  PW_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(options.checkpoint.resume));
  PW_RETURN_IF_ERROR(CheckSameModel(reader->manifest(), interp.module(), reader->manifest_path()));
  PW_RETURN_IF_ERROR(CheckSameData(*reader, header));
  PW_RETURN_IF_ERROR(RestoreRank(*reader, vars, [&](const std::string& name, Tensor t) {
    return interp.SetPersistent(name, std::move(t));
  }));
  const int64_t step = reader->manifest().step();
  if (step >= options.steps)
    return FailedPrecondition(reader->path(), " holds step ", step, ": --steps ", options.steps,
                              " leaves nothing to train");
  return step;
}

}  // namespace

Status RunRank(const Module& module, CommFactory* comm, const RankRunOptions& options) {
  BackendConfig backend_config;
  backend_config.kind = options.backend;
  backend_config.rank = options.rank;
  backend_config.comm = comm;
  backend_config.thread_prefix = StrCat("pw", options.rank);
  backend_config.device = options.device;
  PW_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend_ptr, MakeBackend(backend_config));
  Backend& backend = *backend_ptr;

  InterpreterOptions interp_options;
  interp_options.micro_batches = options.micro_batches;
  interp_options.lowering.feeds = ModuleInputs(module);
  interp_options.lowering.loss = ModuleLoss(module);
  interp_options.lowering.strict_events = options.strict_events;
  PW_ASSIGN_OR_RETURN(auto interp,
                      Interpreter::Create(module, options.rank, backend, interp_options));
  PW_RETURN_IF_ERROR(interp->InitializeParameters());

  const RankCoord coord = interp->layout().Coord(options.rank);
  const int micro_batches = interp->lowered().num_micro_batches;
  const CheckpointManifest header =
      RunHeader(interp->module(), int64_t{micro_batches} * interp->layout().mesh().dp,
                options.data.data_file.empty() ? "synthetic" : "file", options.data.data_seed,
                options.data.data_file);
  const RankVars rank_vars = VarsOfRank(*interp);
  int64_t start = 0;
  double resume_ms = 0;
  if (!options.checkpoint.resume.empty()) {
    const auto begin = std::chrono::steady_clock::now();
    PW_ASSIGN_OR_RETURN(start, Resume(*interp, header, rank_vars, options));
    resume_ms = MsSince(begin);
  }
  if (!options.checkpoint.dir.empty()) {
    PW_RETURN_IF_ERROR(CheckContinuesRun(options.checkpoint.dir, start));
    if (options.rank == 0) PW_RETURN_IF_ERROR(RemovePartialCheckpoints(options.checkpoint.dir));
  }
  PW_RETURN_IF_ERROR(backend.Connect());  // before the first step, not inside it

  PW_ASSIGN_OR_RETURN(auto feed,
                      TrainingFeed::Open(interp->module(), coord.dp, micro_batches, options.data));
  double warmup_ms = 0;
  for (int i = 0; i < options.warmup_steps && start < options.steps; ++i) {
    feed->set_step(start);
    PW_ASSIGN_OR_RETURN(double ms, interp->WarmUp(feed->fn()));
    warmup_ms += ms;
  }
  for (int64_t step = start; step < options.steps; ++step) {
    feed->set_step(step);
    const bool traced = options.on_traced_step && step + options.traced_steps >= options.steps;
    interp->set_tracing(!traced                  ? Tracing::kOff
                        : options.trace_cpu_time ? Tracing::kTimesAndCpu
                                                 : Tracing::kTimes);
    const double cpu_before = options.process_cpu ? ProcessCpuSeconds() : 0;
    PW_ASSIGN_OR_RETURN(StepStats stats, interp->RunStep(feed->fn()));
    const double cpu_ms = options.process_cpu ? (ProcessCpuSeconds() - cpu_before) * 1e3 : -1;
    if (traced) PW_RETURN_IF_ERROR(options.on_traced_step(*interp));
    RankStepReport report;
    report.rank = options.rank;
    report.step = step;
    report.step_ms = stats.step_ms;
    report.peak_bytes = stats.peak_bytes;
    report.redone = stats.redone;
    report.cpu_ms = cpu_ms;
    if (step == start) {
      report.resume_ms = resume_ms;
      report.warmup_ms = warmup_ms;
    }
    if (!stats.losses.empty() && coord.mp == 0) {
      for (double loss : stats.losses) report.loss_sum += loss;
      report.loss_count = static_cast<int>(stats.losses.size());
    }
    if (CheckpointDue(options.checkpoint, step + 1, options.steps)) {
      auto begin = std::chrono::steady_clock::now();
      PW_RETURN_IF_ERROR(interp->SyncParameters());
      PW_ASSIGN_OR_RETURN(
          report.checkpoint_bytes,
          SaveRank(options.checkpoint, header, step + 1, rank_vars,
                   [&](const std::string& name) { return interp->PersistentOnHost(name); }));
      report.checkpoint_ms = MsSince(begin);
    }
    if (options.on_step) options.on_step(report);
  }
  if (options.on_run_end) PW_RETURN_IF_ERROR(options.on_run_end(*interp));
  PW_RETURN_IF_ERROR(interp->SyncParameters());
  std::map<std::string, Tensor> params;
  for (const std::string& name : interp->PersistentNames()) {
    // Post-validation's flags and copies hold nothing once the last step is validated.
    if (!interp->FindPersistent(name) || IsPostValidationVar(name)) continue;
    PW_ASSIGN_OR_RETURN(params[name], interp->PersistentOnHost(name));
  }
  if (!options.save_params.empty()) PW_RETURN_IF_ERROR(SaveTensors(options.save_params, params));
  if (options.final_params) *options.final_params = std::move(params);
  return OkStatus();
}

}  // namespace pw
