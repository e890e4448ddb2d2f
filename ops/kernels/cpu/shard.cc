// c_split: a copy of this member's piece along the axis (outer rows of contiguous pieces).

#include <cstring>

#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

Status CSplit(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  int64_t axis = ctx.attrs().GetInt("axis", 0);  // in range: the op's inference checked it
  if (axis < 0) axis += static_cast<int64_t>(x.shape().size());
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape()[i];
  // Bytes of one member's piece within one outer row, and of the whole row.
  const int64_t piece = out.nbytes() / (outer > 0 ? outer : 1);
  const int64_t row = x.nbytes() / (outer > 0 ? outer : 1);
  const int64_t member = ctx.GroupRank();
  const char* src = static_cast<const char*>(x.raw()) + member * piece;
  char* dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * piece, src + o * row, piece);
  return OkStatus();
}

}  // namespace

void RegisterShardKernels(KernelTable& table) { AddNative<CSplit>(table, "c_split"); }

}  // namespace pw::ops::cpu
