#pragma once
// The dropout mask, shared by the CPU and CUDA kernels: whether an element is kept is a
// pure function of (seed, salt, the element's global index), so a recomputed forward, a
// sequence shard or a head shard draws exactly the mask of the unsharded model. The bits
// come from Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC11), the generator cuRAND and PyTorch use: counter (g / 4, salt), key = seed, and
// element g takes word g % 4 of the block, so four neighbours share one call.
//
// The seed is fed per micro-batch like the tokens (var kDropoutSeedVar, one i64), made by
// DropoutSeed from the run's data seed, the step and the global micro-batch index.

#include <cstdint>

#if defined(__CUDACC__)
#define PW_HOST_DEVICE __host__ __device__
#else
#define PW_HOST_DEVICE
#endif

namespace pw::ops {

// The module input that carries a micro-batch's dropout seed: i64 [1].
inline constexpr const char* kDropoutSeedVar = "dropout_seed";

struct PhiloxBlock {
  uint32_t w[4];
};

PW_HOST_DEVICE inline PhiloxBlock Philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                             uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

// The random words of the four elements 4·group .. 4·group + 3 of one dropout site.
PW_HOST_DEVICE inline PhiloxBlock DropoutBlock(uint64_t seed, uint64_t salt, uint64_t group) {
  return Philox4x32(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                    static_cast<uint32_t>(salt), static_cast<uint32_t>(salt >> 32),
                    static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The words of a run of elements, as a kernel walks them: one Philox call per group of
// four consecutive global indices.
struct DropoutWords {
  uint64_t seed = 0, salt = 0;
  uint64_t group = ~uint64_t{0};
  PhiloxBlock block{};

  // The word of the element at global index g.
  PW_HOST_DEVICE uint32_t Of(uint64_t g) {
    if (g / 4 != group) {
      group = g / 4;
      block = DropoutBlock(seed, salt, group);
    }
    return block.w[g % 4];
  }
};

// An element is dropped when its word is below this: round(p · 2^32), p in [0, 1).
PW_HOST_DEVICE inline uint32_t DropoutThreshold(double p) {
  const double t = p * 4294967296.0 + 0.5;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

// Inverted dropout: kept elements are scaled by 1 / (1 - p).
PW_HOST_DEVICE inline float DropoutScale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

// Where a tensor's elements sit in the whole (unsharded) tensor: the local tensor is rows of
// `inner` contiguous elements along one axis, and is block `block` of `blocks` equal blocks
// (a row split's) of this rank's shard `shard` of `shards` (a sequence or head shard) along
// that axis. Local row `row` = (o, i) with i < `axis_extent` is row block · axis_extent + i of
// the shard, whose extent is blocks · axis_extent, and the shard's row r is global row
// (o · shards + shard) · blocks · axis_extent + r. Whole: shards and blocks 1.
struct DropoutLayout {
  int64_t inner = 1;        // elements after the axis (all of them when whole)
  int64_t axis_extent = 1;  // the local extent of the axis
  int64_t shards = 1;
  int64_t shard = 0;
  int64_t blocks = 1;
  int64_t block = 0;

  PW_HOST_DEVICE int64_t Global(int64_t local) const {
    const int64_t row = local / inner, j = local - row * inner;
    const int64_t o = row / axis_extent, i = row - o * axis_extent;
    const int64_t shard_extent = blocks * axis_extent;
    return ((o * shards + shard) * shard_extent + block * axis_extent + i) * inner + j;
  }
};

// The seed of one micro-batch: a SplitMix64 mix of the run's data seed, the step and the
// global micro-batch (the dp replica's offset included), so it differs per step and per
// micro-batch and is the same on every rank that runs that micro-batch.
inline uint64_t DropoutSeed(uint64_t data_seed, int64_t step, int64_t global_micro_batch) {
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(data_seed) ^ static_cast<uint64_t>(step)) ^
             static_cast<uint64_t>(global_micro_batch));
}

}  // namespace pw::ops
