#pragma once
// A U-Net-style layer stack whose skip connections cross non-adjacent pipeline stages:
//   tokens -> embedding -> L layers of (matmul [H, H] + bias + gelu) -> LM head
//   -> softmax_cross_entropy -> mean.
// For i < L/2 the input of layer L-1-i also gets the output of layer i added to it (the
// innermost pair is skipped when the two layers are adjacent: that input already is the
// output). Layers are split evenly over pp stages; embedding on the first, loss on the last.
// With no normalisation layers, weights are N(0, 1/H) and embeddings N(0, 1) (GPT's 0.02
// would make the signal vanish); biases are zero.

#include <cstdint>

#include "ir/module.h"
#include "ir/status.h"

namespace pw::models {

struct UnetConfig {
  int64_t layers = 4;            // L
  int64_t hidden = 64;           // H
  int64_t micro_batch_size = 1;  // B
  int64_t seq = 16;              // S
  int64_t vocab = 128;           // V
  int pp = 1;
  uint64_t seed = 1;
};

Status ValidateUnetConfig(const UnetConfig& config);

// Inputs `tokens` and `labels` ([B, S] i64), scalar f32 `loss`; metadata as for GPT.
StatusOr<Module> BuildUnet(const UnetConfig& config);

}  // namespace pw::models
