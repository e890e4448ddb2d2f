#pragma once
// Training data for language models: micro-batches of `tokens` and `labels` ([B, S] i64,
// labels = tokens shifted left by one). Micro-batch k of step s is a pure function of
// (seed, s, k), so every parallel layout trains on exactly the same tokens.
//
// Default source: a synthetic stream that is learnable. Each row starts at a token hashed
// from (seed, step, micro-batch, row) and continues with t[i+1] = (a*t[i] + c) mod V,
// a and c fixed by the seed (a coprime with V, so the map is a permutation): a model that
// learns the map predicts every label but none of the first tokens, so the loss can fall
// far below log(V).
// File source: the bytes of a text file as tokens (vocab >= 256); each row reads a window
// of S+1 bytes at an offset hashed from (seed, step, micro-batch, row).
// Dropout: one seed per micro-batch, hashed from (seed, step, micro-batch) as well.

#include <cstdint>
#include <memory>
#include <string>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

struct DataConfig {
  int64_t batch_size = 1;  // B
  int64_t seq_len = 1;     // S
  int64_t vocab = 2;       // V
  uint64_t seed = 1;
  std::string file;  // empty: synthetic
};

struct MicroBatch {
  Tensor tokens;  // [B, S] i64
  Tensor labels;  // [B, S] i64
  // [1] i64: the seed of every dropout mask of the micro-batch (ops/dropout_mask.h), fed
  // as module input "dropout_seed".
  Tensor dropout_seed;
};

class TrainingData {
 public:
  // Errors: non-positive sizes, vocab < 2, an unreadable file, a file shorter than
  // seq_len + 1 bytes, or vocab < 256 with a file.
  static StatusOr<TrainingData> Open(const DataConfig& config);

  const DataConfig& config() const { return config_; }
  // Micro-batch `micro_batch` (0-based) of step `step` (0-based).
  MicroBatch Get(int64_t step, int64_t micro_batch) const;

 private:
  explicit TrainingData(DataConfig config) : config_(std::move(config)) {}
  // Writes S+1 consecutive tokens of one row.
  void FillRow(uint64_t row_hash, int64_t* out) const;

  DataConfig config_;
  std::shared_ptr<const std::string> text_;  // file bytes; null for synthetic data
  int64_t mult_ = 1, incr_ = 0;              // the synthetic map t -> (mult*t + incr) mod V
};

}  // namespace pw
