#pragma once
// A checkpoint on disk: one folder per saved step, complete when it holds its manifest.
//
//   DIR/step-00000013/manifest.pbtxt        proto/checkpoint.proto: run, layout, checksums
//   DIR/step-00000013/rank00000.tensors     each rank's persistable vars (tensor_file.h)
//   DIR/step-00000014.partial/              being written: invisible to readers
//
// This file names the pieces, identifies the model and reads and writes manifests;
// checkpoint_writer.h and checkpoint_reader.h build on it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/module.h"
#include "ir/rank_layout.h"
#include "ir/status.h"
#include "proto/checkpoint.pb.h"

namespace pw {

using CheckpointManifest = ::pipeweave::proto::CheckpointManifest;
using CheckpointRank = ::pipeweave::proto::CheckpointRank;
using CheckpointVar = ::pipeweave::proto::CheckpointVar;

inline constexpr int kCheckpointFormat = 1;
inline constexpr const char* kManifestFile = "manifest.pbtxt";
inline constexpr const char* kPartialSuffix = ".partial";

std::string StepDirName(int64_t step);  // "step-00000013"
// The step of a complete checkpoint's folder name; nullopt for any other name.
std::optional<int64_t> ParseStepDirName(const std::string& name);
std::string RankFileName(int rank);  // "rank00002.tensors"

// The model a checkpoint belongs to, whatever the plan: a hash over every persistable
// var's name, dtype, full (unsharded) shape and initializer. The same model planned with
// another mp x pp x vpp has the same hash; another size, optimizer or precision does not.
// Every persistable var of the module a checkpoint holds, by name, as its first program
// declares it: all but post-validated loss scaling's flags and copies, which hold nothing
// once validated (so a checkpoint resumes with or without post-validation).
std::map<std::string, const Var*> CheckpointedVars(const Module& module);
std::string ModelHash(const Module& module);
// A var as a manifest records it; `var` as a rank holds it (its shard index set).
CheckpointVar PieceOf(const Var& var);
// The stages whose programs rank `rank` runs (stage 0 for a module without a plan).
std::vector<int> StagesOfRank(const Module& module, int rank);

// Complete checkpoints in `dir` (folders with a manifest), by step.
struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
};
std::vector<CheckpointEntry> ListCheckpoints(const std::string& dir);
// `path` itself when it is a checkpoint, else the latest complete checkpoint in it.
StatusOr<std::string> ResolveCheckpoint(const std::string& path);

// Reads `checkpoint`/manifest.pbtxt and checks that it is whole and consistent: its format,
// one entry per rank of its mesh, file names inside the folder, dtypes and shapes.
StatusOr<CheckpointManifest> LoadManifest(const std::string& checkpoint);
// Atomic, synced: the manifest is what makes a checkpoint complete.
Status SaveManifest(const CheckpointManifest& manifest, const std::string& path);

// The message as text, and back (for rank entries the writer collects).
std::string ToText(const google::protobuf::Message& message);
Status FromText(const std::string& text, const std::string& path,
                google::protobuf::Message* message);

// Whether a checkpoint holds `module`'s model: the first var that differs, or the hash.
Status CheckSameModel(const CheckpointManifest& manifest, const Module& module,
                      const std::string& manifest_path);

}  // namespace pw
