#pragma once
// Runs one rank's part of a plan, step after step. The host thread walks the lowered
// instructions in plan order and queues each on its stream; streams run in order and
// wait only on events; the step ends when every stream has drained.
//
//   Interpreter interp = *Interpreter::Create(module, rank, backend, options);
//   interp->InitializeParameters();
//   for (step ...) interp->RunStep(feed);   // feed(var, micro_batch) -> Tensor

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "executor/backend.h"
#include "executor/lowering.h"
#include "executor/memory_tracker.h"
#include "ir/module.h"
#include "ir/rank_layout.h"
#include "ir/status.h"

namespace pw {

struct InterpreterOptions {
  LoweringOptions lowering;
  // Micro-batches per step when the module has no plan (it then runs as one stage).
  int micro_batches = 1;
};

struct StepStats {
  std::vector<double> losses;  // per local micro-batch; empty when this rank has no loss
  double step_ms = 0;
  int64_t peak_bytes = 0;  // most tensor bytes held at once during the step
  // Post-validated loss scaling found that the step before overflowed on some rank: its
  // updates were undone and this step ran again (step_ms counts both runs).
  bool redone = false;
};

class Interpreter {
 public:
  // Tensor of `var` for local micro-batch `micro_batch` of the current step.
  using FeedFn = std::function<StatusOr<Tensor>(const std::string& var, int micro_batch)>;

  // Lowers the plan (checking it first); errors name the job, op or var.
  static StatusOr<std::unique_ptr<Interpreter>> Create(Module module, int rank, Backend& backend,
                                                       InterpreterOptions options);

  // Materialises every persistable var from its initializer (this rank's mp shard).
  Status InitializeParameters();
  // With post-validated loss scaling (ir/post_validation.h), a step that learns the step
  // before overflowed on some rank undoes that step's updates and runs again on the same
  // feed, so the results are the synchronous check's.
  StatusOr<StepStats> RunStep(const FeedFn& feed);
  // Runs a step whose results are thrown away: parameters and optimizer state are copied
  // to host memory before it and put back after it, bit for bit. What a first step pays
  // once (the kernels' code generation and thread pools, faulting in the step's memory,
  // a GPU's lazily loaded kernels and library workspaces) is paid here, before the steps
  // that are timed. Every rank must warm up alike: the step communicates. Returns its
  // time in milliseconds, copies included.
  StatusOr<double> WarmUp(const FeedFn& feed);
  // Whether the next steps record each instruction's times (Instr::times), for a trace.
  void set_tracing(Tracing tracing) { tracing_ = tracing; }
  Tracing tracing() const { return tracing_; }
  // When the last step began (steady-clock nanoseconds), the origin of its times.
  int64_t step_began_ns() const { return step_began_ns_; }

  const Module& module() const { return module_; }
  const LoweredPlan& lowered() const { return *plan_; }
  const RankLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  MemoryTracker& memory() { return memory_; }

  // Parameters and optimizer state, read or replaced between steps. FindPersistent gives
  // the backend's tensor (device memory on a GPU); PersistentOnHost a host tensor, which
  // on the CPU backend shares storage with it. SetPersistent takes a host tensor.
  const Tensor* FindPersistent(const std::string& name) const;
  StatusOr<Tensor> PersistentOnHost(const std::string& name) const;
  // A host copy the caller owns: it never shares storage with the backend's tensor.
  StatusOr<Tensor> PersistentCopyOnHost(const std::string& name) const;
  Status SetPersistent(const std::string& name, Tensor value);
  std::vector<std::string> PersistentNames() const;

  // With overlap-param-gather, the distributed optimizer's parameter all-gathers run at each
  // step's start, so after a step each sharded parameter holds only this dp rank's updated
  // rows (reading one is then an error). SyncParameters runs those all-gathers alone: every
  // rank of the dp group calls it between steps, before parameters are read or saved. A
  // no-op when no parameter is stale. Parameters no step reads whole (amp's f32 masters)
  // are held as this rank's rows alone from a step's start until the sync, as a
  // distributed optimizer shards its master weights: FindPersistent gives those rows then.
  //
  // With post-validated loss scaling it first validates the last step (the flags' reduction
  // over the pipeline, alone), undoing its updates if it overflowed on some rank: every rank
  // of the pipeline calls it then.
  Status SyncParameters();
  bool parameters_stale() const { return parameters_stale_; }
  // After the state was replaced between steps (a checkpoint loaded): the last step's
  // overflow flags, which post-validation would otherwise check, no longer apply.
  Status ForgetLastStep();

 private:
  Interpreter(Module module, int rank, Backend& backend)
      : module_(std::move(module)), rank_(rank), layout_(module_.mesh), backend_(backend) {}
  Status Synchronize();
  Status ResetForStep();
  StatusOr<StepStats> RunStepOnce(const FeedFn& feed);
  // Whether the last step's flags, reduced over the pipeline, say it overflowed.
  StatusOr<bool> LastStepOverflowed() const;
  // Puts back the state the last step's updates changed and applies the loss-scale update
  // of a skipped step to it; the step counts as validated.
  Status UndoLastUpdate();
  // Runs the reduction of the last step's flags alone (between steps) and undoes the step
  // when they say it overflowed.
  Status ValidateLastStep();
  Status SetScalar(const std::string& name, float value);
  // Runs `instrs` alone between steps (events reset first), each on its stream, and waits
  // for them; errors name the rank and `what`.
  Status RunBetweenSteps(const std::vector<const Instr*>& instrs, std::string_view what);
  // The parameters held in shards (LoweredPlan::held_in_rows): cut to their own rows
  // before a step, made whole again (own rows in place, the others' gathered) by a sync.
  Status HoldOwnRows();
  Status WidenToWhole();

  Module module_;
  int rank_;
  RankLayout layout_;
  Backend& backend_;
  MemoryTracker memory_;
  int64_t bucket_bytes_ = 0;  // the dp buckets' allocations of this step
  bool parameters_stale_ = false;
  bool validation_pending_ = false;  // a post-validated step ran since the last validation
  std::unique_ptr<LoweredPlan> plan_;
  std::array<Stream*, kNumStreamTypes> streams_{};
  Tracing tracing_ = Tracing::kOff;
  int64_t step_began_ns_ = 0;
};

}  // namespace pw
