#pragma once
// The attention kernels' causal row blocks: query rows [r0, r1) see keys [0, r1) only, so
// their scores, P·V and the gradients need those columns alone (about 5/8 of the products
// at seq 128). Skipped entries of P are exactly 0 and would only have added zeros.

#include <algorithm>
#include <cstdint>

#include "ops/defs/defaults.h"
#include "ops/kernel.h"

namespace pw::ops::cpu {

inline constexpr int64_t kCausalBlock = 32;

struct Blocks {
  int64_t size;
  bool causal;
  int64_t keys(int64_t r1, int64_t s) const { return causal ? r1 : s; }  // seen by rows < r1
  int64_t first_query(int64_t c0) const { return causal ? c0 : 0; }      // that sees key c0
};

inline Blocks GetBlocks(const KernelContext& ctx, int64_t seq) {
  const bool causal = ctx.attrs().GetBool("causal", kAttentionCausal);
  return Blocks{causal ? kCausalBlock : std::max<int64_t>(seq, 1), causal};
}

// The multiply-adds of one head's forward products (Q·K^T and P·V over the blocks it
// sees) at sequence length `seq` and head size `d`; its backward's four products are twice
// that. The kernels size their ranges of heads by it (parallel_for.h's MacGrain).
inline int64_t HeadMacs(int64_t seq, int64_t d, const Blocks& blocks) {
  int64_t macs = 0;
  for (int64_t r0 = 0; r0 < seq; r0 += blocks.size) {
    const int64_t r1 = std::min(seq, r0 + blocks.size);
    macs += 2 * (r1 - r0) * blocks.keys(r1, seq) * d;
  }
  return macs;
}

}  // namespace pw::ops::cpu
