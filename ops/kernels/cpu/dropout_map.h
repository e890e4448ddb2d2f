#pragma once
// The dropout map on the CPU, shared by dropout, dropout_grad and the fused
// bias_dropout_add: out = in · scale where an element is kept, 0 where dropped, for the
// local elements [begin, end) of a tensor laid out as `a.layout` says. `in` and `out` point
// at element `begin` (and may be the same array). Each element's word comes from Philox by
// its global index, one call per four consecutive ones: any range split gives the same bits.

#include <algorithm>
#include <cstdint>

#include "ops/dropout_args.h"

namespace pw::ops::cpu {

inline void DropoutMapF32(const float* in, float* out, int64_t begin, int64_t end, uint64_t seed,
                          const DropoutArgs& a) {
  DropoutWords words{seed, a.salt};
  int64_t l = begin;
  while (l < end) {
    const int64_t row_end = std::min(end, (l / a.layout.inner + 1) * a.layout.inner);
    for (uint64_t g = static_cast<uint64_t>(a.layout.Global(l)); l < row_end; ++l, ++g)
      out[l - begin] = words.Of(g) >= a.threshold ? in[l - begin] * a.scale : 0.0f;
  }
}

}  // namespace pw::ops::cpu
