#pragma once
// Writes checkpoints so that each is complete or invisible. Every rank writes its tensors
// and an entry (its layout and its file's checksum) into DIR/step-N.partial/; the last rank
// to finish sees every entry, writes the manifest and renames the folder to DIR/step-N. A
// rank killed at any point leaves at most a partial folder, which readers ignore and the
// next run removes; the checkpoints before stay valid.

#include <string>
#include <utility>
#include <vector>

#include "executor/checkpoint_manifest.h"
#include "ops/tensor.h"

namespace pw {

// What one rank contributes: its place and its persistable vars (host tensors).
struct RankCheckpoint {
  int rank = 0;
  RankCoord coord;
  std::vector<int> stages;
  std::vector<std::pair<CheckpointVar, Tensor>> vars;
};

// Writes `rank`'s part of checkpoint `header.step()` (a manifest without rank entries) in
// `dir`; whichever rank completes the checkpoint then drops all but the newest `keep`
// (0: keeps all). Returns the size of the rank's file.
StatusOr<int64_t> WriteRankCheckpoint(const std::string& dir, const CheckpointManifest& header,
                                      const RankCheckpoint& rank, int keep);

// A checkpoint folder continues one run: refused when it already holds a checkpoint after
// `start_step`, which this run would overwrite or leave beside its own.
Status CheckContinuesRun(const std::string& dir, int64_t start_step);

// Removes what killed writers left (partial folders, folders being dropped). Only one rank
// calls it, before its first step: no rank can finish a step, and so start a checkpoint,
// until every rank has begun its first.
Status RemovePartialCheckpoints(const std::string& dir);

}  // namespace pw
