#pragma once
// Checkpoints in a training loop (the rank runner, the reference runner, pw::Executor):
// what a run saves, when, and how it resumes so that it continues bit for bit.
//
// A checkpoint holds every persistable var (parameters, optimizer state, loss scaling),
// the number of steps trained and the data position: micro-batch k of step s is a pure
// function of (seed, s, k) (executor/data.h), and no kernel draws random numbers, so
// resuming at step s with the same seed and micro-batches per step feeds exactly the
// tokens the uninterrupted run would have.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/checkpoint_reader.h"
#include "executor/checkpoint_writer.h"
#include "executor/interpreter.h"

namespace pw {

struct CheckpointOptions {
  std::string dir;     // where checkpoints go; empty: none are written
  int64_t every = 0;   // a checkpoint after every `every` steps; 0: only after the last
  int keep = 0;        // complete checkpoints kept in `dir`; 0: all
  std::string resume;  // a checkpoint to continue, or a folder of them (its latest)
};

// What a run's manifests say besides the ranks and the step. `data_source` is
// "synthetic", "file" or "fed" (a framework feeds its own data).
CheckpointManifest RunHeader(const Module& module, int64_t micro_batches,
                             const std::string& data_source, uint64_t data_seed,
                             const std::string& data_file);

// Whether the checkpoint holds `module`'s model and every var any rank of `module` holds
// can be cut from its pieces.
Status CheckCheckpointFits(const CheckpointReader& reader, const Module& module);
// Whether a run described by `header` continues the checkpoint's data stream.
Status CheckSameData(const CheckpointReader& reader, const CheckpointManifest& header);

// Whether a checkpoint is written after `steps_done` steps of a run of `total_steps`.
bool CheckpointDue(const CheckpointOptions& options, int64_t steps_done, int64_t total_steps);

// A rank's persistable vars as it holds them (shard index set), and its place.
struct RankVars {
  int rank = 0;
  RankCoord coord;
  std::vector<int> stages;
  std::vector<Var> vars;
};
// The persistable vars the interpreter's rank holds.
RankVars VarsOfRank(const Interpreter& interp);
using SetVarFn = std::function<Status(const std::string& name, Tensor value)>;
using GetVarFn = std::function<StatusOr<Tensor>(const std::string& name)>;

// Sets every var of `rank` from the checkpoint (its own rank file first).
Status RestoreRank(CheckpointReader& reader, const RankVars& rank, const SetVarFn& set);
// Writes `rank`'s part of the checkpoint of `step`; returns the size of its file.
StatusOr<int64_t> SaveRank(const CheckpointOptions& options, CheckpointManifest header,
                           int64_t step, const RankVars& rank, const GetVarFn& get);

}  // namespace pw
