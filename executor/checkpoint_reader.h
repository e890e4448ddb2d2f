#pragma once
// Reads a checkpoint for a rank of any plan. A var the new layout cuts as the checkpoint's
// did comes straight from the rank file holding that piece; otherwise its pieces are
// joined along their shard axis and cut as the new layout says (executor/reshard.h), so
// column- and row-parallel weights, vocabulary-parallel rows and their optimizer state
// move from one mp x pp x vpp to another. Every rank file read is checked against the
// manifest's size and checksum first.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/checkpoint_manifest.h"
#include "ops/tensor.h"

namespace pw {

class CheckpointReader {
 public:
  // `path`: a checkpoint folder, or a folder of them (the latest complete one is read).
  static StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  std::string manifest_path() const;
  const CheckpointManifest& manifest() const { return manifest_; }

  // Every rank file is there, of the size and checksum the manifest records.
  Status VerifyFiles() const;
  // Whether the checkpoint's pieces can give `wanted` (from the manifest alone).
  Status CheckCanRead(const CheckpointVar& wanted) const;
  // The value of `wanted`, a var as a rank of the new layout holds it. Of the ranks holding
  // the very piece, `prefer_rank` is read first (-1: the lowest).
  StatusOr<Tensor> Read(const CheckpointVar& wanted, int prefer_rank);
  // Forgets the rank files read so far.
  void Release() { loaded_.clear(); }

 private:
  struct Holder {
    int rank;
    const CheckpointVar* piece;
  };
  // Where a value comes from: one piece as it is, one whole piece to cut, or every shard.
  struct Source {
    std::vector<Holder> pieces;  // in shard order when joined
    bool cut = false;            // the value is a piece of what `pieces` give
  };
  StatusOr<Source> Plan(const CheckpointVar& wanted, int prefer_rank) const;
  StatusOr<const std::map<std::string, Tensor>*> RankTensors(int rank);
  StatusOr<Tensor> PieceTensor(const Holder& holder);

  std::string path_;
  CheckpointManifest manifest_;
  std::map<std::string, std::vector<Holder>> holders_;  // var -> rank files holding a piece
  std::map<int, std::map<std::string, Tensor>> loaded_;
};

}  // namespace pw
