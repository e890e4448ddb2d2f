#pragma once
// What every model builder shares: how parameters are initialised and sharded, where a
// model chunk is placed, and how a module records the configuration that built it.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ir/action.h"
#include "ir/module.h"
#include "ir/status.h"
#include "ir/var.h"

namespace pw::models {

// Megatron's defaults: weights N(0, 0.02), biases zero, layer-norm scales one. `key` is
// the logical parameter name, the same in every parallel layout, so a parameter gets the
// same values whichever program holds it.
inline Initializer NormalInit(std::string key, uint64_t seed, double std = 0.02) {
  Initializer init;
  init.kind = Initializer::Kind::kNormal;
  init.std = std;
  init.seed = seed;
  init.key = std::move(key);
  return init;
}
inline Initializer ZerosInit(std::string key, uint64_t seed) {
  Initializer init;
  init.kind = Initializer::Kind::kZeros;
  init.seed = seed;
  init.key = std::move(key);
  return init;
}
inline Initializer ConstantInit(std::string key, uint64_t seed, double value) {
  Initializer init;
  init.kind = Initializer::Kind::kConstant;
  init.value = value;
  init.seed = seed;
  init.key = std::move(key);
  return init;
}

// Marks `init` as shard 0 of `num_shards` along `axis` of `full_shape`; returns the shard's
// shape. A module describes mp rank 0; an executor sets shard_index to its own mp rank
// (executor/initializer.h: ShardForRank).
inline Shape ShardAlong(Initializer& init, Shape full_shape, int axis, int num_shards) {
  Shape shard = full_shape;
  shard[axis] /= num_shards;
  if (num_shards > 1) {
    init.full_shape = std::move(full_shape);
    init.shard_axis = axis;
    init.shard_index = 0;
    init.num_shards = num_shards;
  }
  return shard;
}

// Where model chunk c of pp*vpp runs: as virtual chunk c / pp of the stage (rank) the
// placement gives virtual stage c (ir/action.h). kLoop is Megatron's interleaved order; kV
// (vpp = 2) sends chunks 0..pp-1 down the ranks and pp..2pp-1 back up, so the first and the
// last chunk share rank 0.
using ChunkPlacement = StagePlacement;

struct Placement {
  int stage = 0;
  int chunk = 0;
};
inline Placement PlaceModelChunk(int model_chunk, int pp,
                                 ChunkPlacement order = ChunkPlacement::kLoop) {
  return Placement{RankOfStage(order, model_chunk, pp), model_chunk / pp};
}

// Module metadata keys every model builder sets.
inline constexpr const char* kMetaModel = "model";    // "gpt", "llama", "unet"
inline constexpr const char* kMetaInputs = "inputs";  // strings: vars fed per micro-batch
inline constexpr const char* kMetaLoss = "loss";      // string: the scalar loss var

// The mesh and the metadata of the fields every transformer config (GptConfig, LlamaConfig)
// shares: its micro-batch and its parallel layout. The program is the same for every dp
// replica: dp only says how many copies of it share a step's micro-batches.
template <typename TransformerConfig>
Mesh TransformerMesh(const TransformerConfig& c) {
  return Mesh{.dp = c.dp, .pp = c.pp, .mp = c.mp, .vpp = c.vpp};
}
template <typename TransformerConfig>
void RecordParallelLayout(const TransformerConfig& c, AttrList& meta) {
  meta.Set("micro_batch_size", c.micro_batch_size);
  // Recorded only when there are replicas, so that modules built before dp read back as
  // they were written (a missing dp reads as 1).
  if (c.dp > 1) meta.Set("dp", int64_t{c.dp});
  meta.Set("mp", int64_t{c.mp});
  meta.Set("pp", int64_t{c.pp});
  meta.Set("vpp", int64_t{c.vpp});
  meta.Set("placement", std::string(StagePlacementName(c.placement)));
  meta.Set("vocab_parallel", c.vocab_parallel && c.mp > 1);
  if (!c.stage_layers.empty()) meta.Set("stage_layers", c.stage_layers);
}

}  // namespace pw::models
