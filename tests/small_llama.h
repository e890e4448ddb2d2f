#pragma once
// The small Llama the Llama tests train: 4 layers, hidden 64, 4 query heads on 2 kv heads,
// ffn 128, seq 16, vocab 128, micro-batch size 2 (the small GPT's shape), on a given mesh
// and chunk placement.

#include "models/llama.h"

namespace pw::testing {

inline models::LlamaConfig SmallLlamaConfig(
    int mp = 1, int pp = 1, int vpp = 1,
    models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  models::LlamaConfig c;
  c.layers = 4;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn = 128;
  c.seq = 16;
  c.vocab = 128;
  c.micro_batch_size = 2;
  c.mp = mp;
  c.pp = pp;
  c.vpp = vpp;
  c.placement = placement;
  return c;
}

}  // namespace pw::testing
