#pragma once
// A Llama-family decoder (pre-RMSNorm, SwiGLU MLP, rotary position embeddings,
// grouped-query attention, no biases, untied LM head) with Megatron tensor parallelism and
// the GPT builder's pipeline placement (models/gpt.h), as a forward + loss program.
//
// Tensor parallelism (mp = M), each layer:
//   rms_norm -> c_identity -> Q [H, A·d/M], K and V [H, G·d/M] (column-parallel, d = H/A)
//   -> rotary on Q and K -> gqa_attention (A/M query heads on G/M kv heads, causal)
//   -> O [A·d/M, H] (row-parallel) -> c_allreduce_sum -> residual add -> rms_norm
//   -> c_identity -> gate and up [H, F/M] (column-parallel side by side) -> swiglu
//   -> down [F/M, H] (row-parallel) -> c_allreduce_sum -> residual add.
// Key/value heads are split over the mp group when there are at least mp of them (G a
// multiple of M). A single kv head (G = 1 < M) is replicated instead: every rank projects
// the whole K and V from the layer norm's output, and a c_identity after each makes their
// gradient the sum of the parts that every rank's query heads give it.
//
// The embedding table and the LM head are vocabulary-parallel as in the GPT (c_embedding,
// parallel cross-entropy), parameters carry their logical names and shards as there, and
// ops are named `layerN.*` (activation recomputation finds layers by that prefix).

#include <cstdint>
#include <vector>

#include "ir/module.h"
#include "ir/status.h"
#include "models/model_config.h"

namespace pw::models {

struct LlamaConfig {
  int64_t layers = 2;            // L
  int64_t hidden = 64;           // H
  int64_t heads = 4;             // A, query heads
  int64_t kv_heads = 2;          // G, key/value heads (divides A)
  int64_t ffn = 172;             // F, the SwiGLU's inner width
  int64_t seq = 16;              // S
  int64_t vocab = 128;           // V
  double rope_theta = 10000.0;   // rotary base (Llama 3: 500000)
  int64_t micro_batch_size = 1;  // B
  int dp = 1;  // data-parallel replicas, each running the program on its own micro-batches
  int mp = 1;
  int pp = 1;
  int vpp = 1;
  ChunkPlacement placement = ChunkPlacement::kLoop;  // kV needs vpp = 2
  bool vocab_parallel = true;                        // shard the vocabulary when mp > 1
  // Layers of each model chunk in order (pp * vpp counts); empty: layers / (pp * vpp) each.
  std::vector<int64_t> stage_layers;
  uint64_t seed = 1;
};

// One line naming the first bad setting, e.g. "llama: kv-heads 3 does not divide heads 8".
Status ValidateLlamaConfig(const LlamaConfig& config);

// Inputs `tokens` and `labels` ([B, S] i64), scalar f32 `loss`. Module metadata records the
// model name ("llama"), the inputs, the loss var and every config field.
StatusOr<Module> BuildLlama(const LlamaConfig& config);

}  // namespace pw::models
