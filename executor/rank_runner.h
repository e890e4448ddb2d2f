#pragma once
// Trains one rank of a module for a number of steps: parameters from their initializers,
// tokens from TrainingData, the rank's part of the plan on the chosen backend (CPU by
// default). Used by rank processes (with Gloo, or NCCL for CUDA) and by tests that run
// ranks as threads (in-process transport).

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "executor/backend_factory.h"
#include "executor/comm/stream_comm.h"
#include "executor/training_checkpoints.h"
#include "executor/training_feed.h"
#include "ir/module.h"
#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

class Interpreter;

struct RankStepReport {
  int rank = 0;
  int64_t step = 0;     // 0-based
  double loss_sum = 0;  // over this rank's micro-batches, in order (reporting ranks only)
  int loss_count = 0;   // 0: this rank does not report the loss
  double step_ms = 0;
  int64_t peak_bytes = 0;
  int64_t checkpoint_bytes = 0;  // this rank's checkpoint file after the step; 0: none
  double checkpoint_ms = 0;      // the time it took to write
  double resume_ms = 0;  // first step of a resumed run: the time its checkpoint took to load
  double warmup_ms = 0;  // first step: the time the warm-up steps before it took
  // The CPU time of the rank's process while it ran the step, all its threads (stream
  // threads spinning and communicating included); < 0: not measured (RankRunOptions).
  double cpu_ms = -1;
  // cpu_ms, NaN where not measured (so that a sum over ranks says so).
  double MeasuredCpuMs() const { return cpu_ms >= 0 ? cpu_ms : NAN; }
  // Post-validated loss scaling ran the step twice: the step before overflowed on some rank.
  bool redone = false;
};

struct RankRunOptions {
  int rank = 0;
  int64_t steps = 1;      // in all: a resumed run trains the steps after its checkpoint's
  int micro_batches = 1;  // for a module without a plan
  // Untimed steps on the first step's data before it, their updates undone
  // (Interpreter::WarmUp), so that the first timed step costs what the later ones do.
  int warmup_steps = 0;
  TrainingFeedOptions data;
  bool strict_events = false;
  // The rank has a process of its own: each step reports its process's CPU time (cpu_ms).
  bool process_cpu = false;
  BackendKind backend = BackendKind::kCpu;
  int device = -1;          // cuda: -1 takes rank % visible devices
  std::string save_params;  // file for this rank's persistable vars after the last step
  CheckpointOptions checkpoint;
  std::map<std::string, Tensor>* final_params = nullptr;  // filled after the last step
  std::function<void(const RankStepReport&)> on_step;
  // Called after each of the last `traced_steps` steps, which then record every
  // instruction's times (Instr::times), e.g. to write a trace; its error fails the run.
  std::function<Status(const Interpreter&)> on_traced_step;
  int traced_steps = 1;
  // Traced steps also record each instruction's stream-thread CPU time (Instr::Times::cpu);
  // on ranks sharing cores that makes a traced step ~35 % longer.
  bool trace_cpu_time = false;
  // Called once after the last step, before the parameters are synced; its error fails
  // the run.
  std::function<Status(const Interpreter&)> on_run_end;
};

// `comm` (not owned) may be null for a world of one. A rank reports the loss when it
// computes it and is mp rank 0, so summing reports over ranks counts every micro-batch once.
Status RunRank(const Module& module, CommFactory* comm, const RankRunOptions& options);

}  // namespace pw
