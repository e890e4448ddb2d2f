#pragma once
// A GPT-style decoder (pre-layer-norm, learned positions, untied LM head) with Megatron
// tensor parallelism and interleaved pipeline placement, as a forward + loss program.
//
// Tensor parallelism (mp = M): each layer is
//   layer_norm -> c_identity -> QKV matmul [H, 3H/M] (column-parallel) + bias -> attention
//   (A/M heads, causal) -> out-proj matmul [H/M, H] (row-parallel) -> c_allreduce_sum
//   -> bias [H] -> residual add -> layer_norm -> c_identity -> FC1 [H, F/M] + bias -> gelu
//   -> FC2 [F/M, H] -> c_allreduce_sum -> bias [H] -> residual add (with bias_fusion the
//   bias adds after the out-proj and FC2, their dropout and the residual add are one
//   bias_dropout_add each, FC1's bias and the gelu one bias_gelu).
// The fused QKV columns are laid out per head as (head, {q, k, v}, head_dim), so a
// contiguous column shard holds whole heads. The module is the program of mp rank 0;
// sharded parameters carry full_shape / shard_axis / num_shards in their initializer and
// an executor materialises rank r's shard with shard_index = r.
//
// Vocabulary parallelism (vocab_parallel, with mp > 1; Megatron's): the embedding table's
// rows and the LM head's columns are sharded over the mp group, so no rank holds the full
// vocabulary: c_embedding (this rank's rows, zeros elsewhere) -> c_allreduce_sum, and
// c_identity -> head matmul [H, V/M] -> the parallel softmax cross-entropy (reduce_max ->
// c_allreduce_max, c_softmax_stats -> c_allreduce_sum, c_softmax_cross_entropy). The
// shards are exact slices of the mp = 1 parameters. Without it (or at mp = 1) every rank
// holds the whole table and head.
//
// Pipeline parallelism (pp = P, vpp virtual chunks): layers are split into P*vpp model
// chunks, evenly or as `stage_layers` lists (Megatron's fewer layers on the first and last
// stages, which also hold the embeddings and the LM head); model chunk c runs on stage c % P as
// chunk c / P (or, with the V placement and vpp = 2, down the ranks and back up: stage c < P ? c :
// 2P-1-c). The embeddings are on the first model chunk, the final layer norm, LM head and loss on
// the last.

#include <cstdint>
#include <vector>

#include "ir/module.h"
#include "ir/status.h"
#include "models/model_config.h"

namespace pw::models {

struct GptConfig {
  int64_t layers = 2;            // L
  int64_t hidden = 64;           // H
  int64_t heads = 4;             // A
  int64_t ffn = 256;             // F
  int64_t seq = 16;              // S
  int64_t vocab = 128;           // V
  int64_t micro_batch_size = 1;  // B
  int dp = 1;  // data-parallel replicas, each running the program on its own micro-batches
  int mp = 1;
  int pp = 1;
  int vpp = 1;
  ChunkPlacement placement = ChunkPlacement::kLoop;  // kV needs vpp = 2
  bool vocab_parallel = true;                        // shard the vocabulary when mp > 1
  // Layers of each model chunk in order (pp * vpp counts, each >= 1, summing to layers);
  // empty: layers / (pp * vpp) each.
  std::vector<int64_t> stage_layers;
  // Attention as separate ops (regroup, q.k^T, causal softmax, times v), the way 2020-22
  // frameworks ran it, instead of the fused attention op (a flash-style kernel).
  bool unfused_attention = false;
  // Megatron's dropout at this probability (0: none): on the embeddings, on the attention
  // probabilities (unfused attention only: the fused op has no dropout), and on the output of
  // the attention projection and of the MLP before each residual add. The masks' seed is the
  // fed input `dropout_seed` ([1] i64, one per micro-batch).
  double dropout = 0;
  // Megatron's fused bias epilogues (its --bias-gelu-fusion and --bias-dropout-fusion, on by
  // default there): fc1's bias and the gelu in one bias_gelu, the attention projection's and
  // fc2's bias, dropout and residual add in one bias_dropout_add. The same parameters and, in
  // f32, the same training bit for bit; fewer passes over the activations.
  bool bias_fusion = false;
  uint64_t seed = 1;
};

// One line naming the first bad setting, e.g. "gpt: hidden 100 is not divisible by heads 3".
Status ValidateGptConfig(const GptConfig& config);

// Inputs `tokens` and `labels` ([B, S] i64) and, with dropout, `dropout_seed`; scalar f32 `loss`.
// Module metadata records the model name, the inputs, the loss var and every config field.
StatusOr<Module> BuildGpt(const GptConfig& config);

}  // namespace pw::models
