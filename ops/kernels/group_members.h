#pragma once
// Member arithmetic the collective kernels of every backend share.

#include <cstddef>
#include <cstdint>

#include "ops/kernel.h"

namespace pw::ops {

// Member index `m` of a group of `members`, wrapped into [0, members).
inline int Member(int64_t m, int members) {
  return static_cast<int>(((m % members) + members) % members);
}

// Block k of a c_member_concat or c_member_sum came from member (m - k), m this rank's
// member index: the block of member j is X[(m - j) mod n].
inline const Tensor& BlockOfMember(const KernelContext& ctx, int j, int members) {
  return *ctx.In("X", static_cast<size_t>(Member(ctx.GroupRank() - j, members)));
}

}  // namespace pw::ops
