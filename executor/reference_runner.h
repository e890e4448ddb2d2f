#pragma once
// Sequential single-process training of an unsplit module (mp=1, pp=1) whose main program
// holds forward, backward and optimizer ops (the output of `append-backward`). It is the
// ground truth every parallel execution is compared with, so it is deliberately plain:
//
//   for each step:
//     for micro-batch k in 0..M-1 (a child scope of the root scope each):
//       feed tokens/labels of (step, k); run every non-optimize op in program order;
//       grad_acc[g] += g for every gradient the optimizer reads (in micro-batch order)
//     g = grad_acc[g] * (1.0f / M); run the optimize ops on the root scope
//   loss of the step = mean over its micro-batch losses
//
// Parameters and optimizer state (persistable vars) are materialised into the root scope
// from their initializers; intermediates are freed after their last use.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/training_checkpoints.h"
#include "ir/module.h"
#include "ir/status.h"

namespace pw {

struct ReferenceOptions {
  int64_t steps = 1;  // in all: a resumed run trains the steps after its checkpoint's
  int64_t micro_batches = 1;
  uint64_t data_seed = 1;  // selects the token stream (executor/data.h)
  std::string data_file;   // byte-level text; empty: synthetic data
  // Kernel threads (executor/process_resources.h). Kernels split rows and columns, not
  // sums, among threads, so every count gives the same bits.
  int threads = 1;
  // Untimed steps on the first step's data before it, their updates undone, so that the
  // first timed step costs what the later ones do.
  int warmup_steps = 0;
  // Persistable scalars recorded after every step (their first element), e.g. the loss
  // scale and skipped-step count of fp16 loss scaling.
  std::vector<std::string> track;
  // Called after every step (0-based) as soon as it finishes; may be null.
  std::function<void(int64_t step, double loss, double step_ms)> on_step;
  // Checkpoints (one rank), and what each written took; may be null.
  CheckpointOptions checkpoint;
  std::function<void(int64_t step, int64_t bytes, double ms)> on_checkpoint;
};

struct ReferenceResult {
  int64_t first_step = 0;                    // 0-based; after the checkpoint resumed
  std::vector<double> losses;                // per step run
  std::vector<double> step_time_ms;          // per step, wall time
  std::vector<double> step_cpu_ms;           // per step, the process's CPU time
  double warmup_ms = 0;                      // the warm-up steps before the first
  std::vector<std::vector<double>> tracked;  // [i][step]: options.track[i] after the step
};

// One-line errors: a module that is split, not mp=1/pp=1, has no backward or no optimizer
// ops, lacks an input, uses an op without a CPU kernel, fails verification, or tracks a
// var that is not a persistable f32 var.
StatusOr<ReferenceResult> RunReference(const Module& module, const ReferenceOptions& options);

}  // namespace pw
