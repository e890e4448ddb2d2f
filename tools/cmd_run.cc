// `pipeweave run FILE --reference ...`: trains a module and prints its loss per step.
// Only the sequential reference path exists so far (executor/reference_runner.h).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "executor/reference_runner.h"
#include "ir/limits.h"
#include "ir/proto_io.h"
#include "passes/pass_manager.h"
#include "tools/checkpoint_flags.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/global_batch_flag.h"
#include "tools/module_validation.h"
#include "tools/run_parallel.h"
#include "tools/threads_flag.h"

namespace pw::tools {
namespace {

constexpr const char* kUsage =
    "pipeweave run FILE --reference --steps K [--micro-batches M (1) | --global-batch G]\n"
    "           [--seed N]\n"
    "           [--data TEXT_FILE] [--report json] [--backend cpu] [--track VAR[,VAR...]]\n"
    "           [--threads N] [--checkpoint-dir DIR [--checkpoint-every K] [--keep N]]\n"
    "           [--resume PATH] [--warmup-steps W (1)]\n"
    "Trains an unsplit mp=1, pp=1 module sequentially (gradient accumulation over M\n"
    "micro-batches, then the optimizer) and prints 'step S loss L' per step, or with\n"
    "--report json one object {\"losses\": [...], \"step_time_ms\": [...], \"step_cpu_ms\":\n"
    "[the process's CPU time in each step], ...}.\n"
    "A module without backward ops gets 'append-backward' with its defaults first; for\n"
    "another optimizer run 'pipeweave opt FILE -p append-backward{optimizer=adam,lr=0.01}'.\n"
    "--global-batch G runs G / micro-batch size micro-batches per step (the batch a dp plan's\n"
    "replicas share; the same tokens in the same order).\n"
    "--seed selects the training tokens (default: the seed the model was built with);\n"
    "--data reads byte tokens from a text file instead of the synthetic stream.\n"
    "--track prints persistable f32 scalars after every step (e.g. fp16 loss scaling's\n"
    "amp.loss_scale and amp.skipped_steps), in the JSON as \"tracked\": {VAR: [...]}.\n"
    "--threads sets the BLAS threads (default: $OPENBLAS_NUM_THREADS, $OMP_NUM_THREADS,\n"
    "else every core).\n"
    "--warmup-steps W runs W untimed steps on the first step's data before it and undoes\n"
    "their updates, so that the first step's time is not the warm-up's (JSON: warmup_ms).\n"
    "Without --reference, `run` trains a planned module on rank processes: see\n"
    "'pipeweave run-parallel --help' (--nproc N, or --rank R --world-size N --store ...),\n"
    "which also takes --backend cpu|cuda; the reference always runs on the CPU.";

// Adds backward and optimizer ops (the pass's default optimizer) to a forward-only module.
Status AppendBackward(Module& module) {
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline("append-backward"));
  return pm.Run(module).status().WithContext("append-backward");
}

bool HasBackward(const Module& module) {
  for (const Program& program : module.programs())
    for (const Op& op : program.ops())
      if (op.role == OpRole::kBackward) return true;
  return false;
}

// Non-finite values (a diverged loss) print as null: JSON has no NaN or Infinity.
void PrintJsonArray(const char* key, const std::vector<double>& values, const char* fmt) {
  std::printf("\"%s\": [", key);
  for (size_t i = 0; i < values.size(); ++i) {
    std::printf(i ? ", " : "");
    if (std::isfinite(values[i])) {
      std::printf(fmt, values[i]);
    } else {
      std::printf("null");
    }
  }
  std::printf("]");
}

// The sequential reference path: loss per step of an unsplit mp=1, pp=1 module.
StatusOr<int> RunReferenceMode(Module module, const Flags& flags) {
  std::string report = flags.Get("report");
  if (!report.empty() && report != "json")
    return InvalidArgument("flag --report: unknown format '", report, "' (json)");
  ReferenceOptions options;
  PW_ASSIGN_OR_RETURN(options.steps, flags.RequireInt("steps"));
  PW_ASSIGN_OR_RETURN(options.micro_batches, flags.GetInt("micro-batches", 1, 1, kMaxMicroBatches));
  // The reference runs a step's whole global batch on its one rank.
  PW_ASSIGN_OR_RETURN(std::optional<int> from_global, ReadGlobalBatchFlag(flags, module, 1));
  if (from_global) options.micro_batches = *from_global;
  PW_ASSIGN_OR_RETURN(options.checkpoint, ReadCheckpointFlags(flags));
  PW_ASSIGN_OR_RETURN(const uint64_t default_seed,
                      ResumedDataSeed(options.checkpoint, module.metadata.GetInt("seed", 1)));
  PW_ASSIGN_OR_RETURN(int64_t seed,
                      flags.GetInt("seed", static_cast<int64_t>(default_seed), 0, kInt64Max));
  options.data_seed = static_cast<uint64_t>(seed);
  options.data_file = flags.Get("data");
  if (options.steps < 1) return InvalidArgument("flag --steps must be >= 1");
  if (options.micro_batches < 1) return InvalidArgument("flag --micro-batches must be >= 1");
  PW_ASSIGN_OR_RETURN(options.threads, ReadThreadsFlag(flags, 1));
  PW_ASSIGN_OR_RETURN(int64_t warmup, flags.GetInt("warmup-steps", 1, 0, 100));
  options.warmup_steps = static_cast<int>(warmup);
  if (!HasBackward(module)) PW_RETURN_IF_ERROR(AppendBackward(module));
  const std::string track = flags.Get("track");
  for (std::string_view rest = track; !rest.empty();) {
    size_t comma = rest.find(',');
    options.track.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
  }

  const CheckpointManifest header =
      RunHeader(module, options.micro_batches, options.data_file.empty() ? "synthetic" : "file",
                options.data_seed, options.data_file);
  PW_RETURN_IF_ERROR(
      CheckCheckpointsBeforeRun(options.checkpoint, module, header, options.steps).status());

  const bool json = report == "json";
  const bool tracking = !options.track.empty();
  if (!json && !tracking) {
    options.on_step = [](int64_t step, double loss, double) {
      std::printf("step %lld loss %.4f\n", static_cast<long long>(step + 1), loss);
      std::fflush(stdout);
    };
  }
  std::vector<std::string> checkpoints;  // as JSON objects
  options.on_checkpoint = [&](int64_t step, int64_t bytes, double ms) {
    if (!json && !tracking)
      std::printf("checkpoint after step %lld: %.2f MiB, %.1f ms\n",
                  static_cast<long long>(step + 1), bytes / 1048576.0, ms);
    checkpoints.push_back(
        StrCat("{\"step\": ", step + 1, ", \"bytes\": [", bytes, "], \"ms\": [", ms, "]}"));
  };
  PW_ASSIGN_OR_RETURN(ReferenceResult result, RunReference(module, options));
  if (json) {
    std::printf(
        "{\"mode\": \"reference\", \"steps\": %lld, \"micro_batches\": %lld, \"seed\": %llu, ",
        static_cast<long long>(options.steps), static_cast<long long>(options.micro_batches),
        static_cast<unsigned long long>(options.data_seed));
    std::printf("\"first_step\": %lld, ", static_cast<long long>(result.first_step + 1));
    PrintJsonArray("losses", result.losses, "%.17g");
    std::printf(", ");
    PrintJsonArray("step_time_ms", result.step_time_ms, "%.3f");
    std::printf(", ");
    PrintJsonArray("step_cpu_ms", result.step_cpu_ms, "%.3f");
    std::printf(", \"warmup_steps\": %d, \"warmup_ms\": %.3f", options.warmup_steps,
                result.warmup_ms);
    if (!checkpoints.empty()) {
      std::printf(", \"checkpoints\": [");
      for (size_t i = 0; i < checkpoints.size(); ++i)
        std::printf("%s%s", i ? ", " : "", checkpoints[i].c_str());
      std::printf("]");
    }
    if (tracking) {
      std::printf(", \"tracked\": {");
      for (size_t i = 0; i < options.track.size(); ++i) {
        std::printf(i ? ", " : "");
        PrintJsonArray(options.track[i].c_str(), result.tracked[i], "%.17g");
      }
      std::printf("}");
    }
    std::printf("}\n");
  } else if (tracking) {
    for (size_t s = 0; s < result.losses.size(); ++s) {
      std::printf("step %lld loss %.4f", static_cast<long long>(result.first_step + s + 1),
                  result.losses[s]);
      for (size_t i = 0; i < options.track.size(); ++i)
        std::printf(" %s %g", options.track[i].c_str(), result.tracked[i][s]);
      std::printf("\n");
    }
  }
  return 0;
}

StatusOr<int> RunRun(const std::vector<std::string>& args) {
  // Without --reference the module runs on rank processes (tools/cmd_run_parallel.cc).
  if (std::find(args.begin(), args.end(), "--reference") == args.end()) return RunParallel(args);
  Flags flags;
  flags.Switch("reference");
  for (const char* name : {"steps", "micro-batches", "global-batch", "seed", "data", "report",
                           "backend", "track", "threads", "warmup-steps"})
    flags.Value(name);
  DeclareCheckpointFlags(flags);
  PW_RETURN_IF_ERROR(flags.Parse(args));
  // The reference runner is the CPU's sequential baseline; GPU runs go to rank processes.
  if (flags.Get("backend", "cpu") != "cpu")
    return InvalidArgument("--reference runs on the CPU; drop --reference to train with --backend ",
                           flags.Get("backend"), " (with --nproc N)");
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one module file, got ", flags.positional().size(),
                           " positional arguments");
  PW_ASSIGN_OR_RETURN(Module module, LoadValidModule(flags.positional()[0]));
  return RunReferenceMode(std::move(module), flags);
}

}  // namespace

PW_REGISTER_COMMAND(run, "run", "train a module and print its loss per step",
                    StrCat(kUsage, "\n", kCheckpointUsage), RunRun, /*internal=*/false,
                    /*trains=*/true);

}  // namespace pw::tools
