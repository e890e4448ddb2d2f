#pragma once
// The checkpoint flags of `run` and `run-parallel`: --checkpoint-dir DIR
// [--checkpoint-every K] [--keep N] and --resume PATH, and the checks that refuse a bad
// combination before any step runs (so that nothing is trained or overwritten).

#include <cstdint>

#include "executor/training_checkpoints.h"
#include "tools/flags.h"

namespace pw::tools {

inline constexpr const char* kCheckpointFlags[] = {"checkpoint-dir", "checkpoint-every", "keep",
                                                   "resume"};
inline constexpr const char* kCheckpointUsage =
    "--checkpoint-dir DIR writes a checkpoint (every persistable var, the step, the data\n"
    "position; one manifest) after every --checkpoint-every K steps and after the last, each\n"
    "complete or not there at all; --keep N keeps the newest N. --resume PATH continues from\n"
    "a checkpoint (or the latest in a folder of them), also one written under another plan of\n"
    "the same model, up to --steps in all.";

// Declares the flags.
void DeclareCheckpointFlags(Flags& flags);
StatusOr<CheckpointOptions> ReadCheckpointFlags(const Flags& flags);

// The data seed of a resumed checkpoint when the command line gives none: a resumed run
// continues the checkpoint's tokens. `fallback` otherwise.
StatusOr<uint64_t> ResumedDataSeed(const CheckpointOptions& options, uint64_t fallback);

// Before the run: the checkpoint to resume holds this model (cut for every rank of
// `module`), continues `header`'s data, is whole (sizes and checksums) and leaves steps to
// train; the checkpoint folder continues this run. `options.resume` is set to the very
// checkpoint, so that every rank reads the same one. Returns the step the run starts at.
StatusOr<int64_t> CheckCheckpointsBeforeRun(CheckpointOptions& options, const Module& module,
                                            const CheckpointManifest& header, int64_t steps);

}  // namespace pw::tools
