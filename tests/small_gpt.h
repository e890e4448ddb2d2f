#pragma once
// The small GPT most tests train: 4 layers, hidden 64, 4 heads, seq 16, vocab 128,
// micro-batch size 2 (the README's example), on a given mesh and chunk placement.

#include "models/gpt.h"

namespace pw::testing {

inline models::GptConfig SmallGptConfig(
    int mp = 1, int pp = 1, int vpp = 1,
    models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  models::GptConfig c;
  c.layers = 4;
  c.hidden = 64;
  c.heads = 4;
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
