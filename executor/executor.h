#pragma once
// The embedding API: what a framework links (find_package(pipeweave), target
// pipeweave::executor) to run a planned module as one rank of a job it launches itself.
//
//   pw::ExecutorOptions options;
//   options.rank = rank;                        // of module.mesh.world_size()
//   options.store = "/shared/run42";            // or "redis://host:6379/run42"; world > 1
//   auto exec = pw::Executor::Load("gpt_1f1b.pb", options).value();
//   for (int step = 0; step < steps; ++step) {
//     for (int mb = 0; mb < exec->num_micro_batches(); ++mb) {
//       exec->Feed("tokens", mb, tokens[mb]);
//       exec->Feed("labels", mb, labels[mb]);
//     }
//     pw::StepStats stats = exec->Step().value();   // losses per micro-batch (last stage)
//   }
//   pw::Tensor w = exec->Fetch("layer0.fc1.w").value();
//
// A module built with dropout also reads "dropout_seed" ([1] i64) every micro-batch: feed
// the same value on every rank for one micro-batch, a new one per step and micro-batch
// (ops/dropout_mask.h: DropoutSeed(data seed, step, global micro-batch) is what `run` feeds).
//
// Checkpoints: with options.checkpoint_dir set, every rank calls SaveCheckpoint(step)
// after the same step; the last one to finish completes the checkpoint. A restarted job
// calls LoadCheckpoint(dir) on every rank before its first step (also under another
// mp x pp x vpp plan of the same model) and continues after the step it returns.
//
// One Executor per process and rank; parameters start from their initializers (or
// Assign). Errors come back as Status, never as exceptions or aborts.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend_factory.h"
#include "executor/interpreter.h"
#include "executor/training_checkpoints.h"
#include "ir/module.h"
#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

struct ExecutorOptions {
  int rank = 0;
  int micro_batches = 1;  // per step, for a module without a plan
  std::string store;      // rendezvous for world size > 1: a directory or redis://HOST:PORT
  std::string hostname = "127.0.0.1";  // the address this rank listens on
  bool strict_events = false;
  BackendKind backend = BackendKind::kCpu;  // kCuda: NCCL between ranks
  int device = -1;                          // cuda: -1 takes rank % visible devices
  int blas_threads = 1;             // process-wide kernel threads; 0 leaves the setting alone
  std::vector<std::string> inputs;  // fed per micro-batch; default: the module's metadata
  std::string loss;                 // scalar fetched per micro-batch; default: metadata
  // Where SaveCheckpoint writes. Rank 0 removes what killed writers left there when it is
  // created, which is before any rank can finish a step.
  std::string checkpoint_dir;
  int checkpoint_keep = 0;  // complete checkpoints kept there; 0: all
};

class Executor {
 public:
  static StatusOr<std::unique_ptr<Executor>> Load(const std::string& path,
                                                  const ExecutorOptions& options);
  static StatusOr<std::unique_ptr<Executor>> Create(Module module, const ExecutorOptions& options);
  ~Executor();

  int rank() const;
  int world_size() const;
  int num_micro_batches() const;
  const std::vector<std::string>& inputs() const { return inputs_; }
  // Whether this rank computes the loss (the last pipeline stage).
  bool computes_loss() const;

  // Sets input `var` of local micro-batch `micro_batch` for the next Step.
  Status Feed(const std::string& var, int micro_batch, Tensor value);
  // Runs one step over every micro-batch; fed values are consumed. With post-validated
  // loss scaling a step after one that overflowed runs twice on them (StepStats::redone).
  StatusOr<StepStats> Step();
  // Runs a step on the values fed for the next one, without consuming them, and undoes its
  // updates bit for bit (Interpreter::WarmUp): called by every rank before the first
  // Step, it makes that step cost what the later ones do. Returns its milliseconds.
  StatusOr<double> WarmUp();

  // Parameters and optimizer state (this rank's shard), by var name. With
  // overlap-param-gather a sharded parameter is whole only after SyncParameters, and with
  // post-validated loss scaling the last step's updates are final only after it (so call
  // it before Assign too: a validation that undoes the last step would overwrite the value).
  StatusOr<Tensor> Fetch(const std::string& name) const;
  Status Assign(const std::string& name, const Tensor& value);
  std::vector<std::string> PersistentNames() const;
  // With overlap-param-gather: all-gathers the parameters the last step updated only this
  // dp rank's rows of (they are gathered at the next step's start otherwise); with
  // post-validated loss scaling: validates the last step, undoing it if it overflowed on
  // some rank. Every rank calls it, between steps, before Fetch; SaveCheckpoint calls it
  // itself.
  Status SyncParameters();

  // Writes this rank's persistable vars as the checkpoint of `step` (steps trained). Every
  // rank calls it (it may all-gather parameters: SyncParameters).
  Status SaveCheckpoint(int64_t step);
  // Sets this rank's persistable vars from a checkpoint folder, or from the latest complete
  // checkpoint in a folder of them, cutting each var for this plan; returns its step.
  StatusOr<int64_t> LoadCheckpoint(const std::string& path);

 private:
  struct Comm;
  Executor() = default;
  Interpreter::FeedFn FedValues() const;  // reads fed_

  std::vector<std::string> inputs_;
  std::map<std::pair<std::string, int>, Tensor> fed_;
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Interpreter> interp_;
  CheckpointOptions checkpoint_;
};

}  // namespace pw
