#pragma once
// Internal: split and concat as 2-D strided byte copies (one row per index before the
// axis), planned once for every backend: the CPU kernels copy the rows with memcpy, the CUDA
// kernels with one cudaMemcpy2DAsync per copy.

#include <cstdint>
#include <vector>

#include "ir/status.h"
#include "ops/kernel.h"

namespace pw::ops {

// `rows` rows of `width` bytes: row r from src + r * src_pitch to dst + r * dst_pitch.
struct StridedCopy {
  char* dst = nullptr;
  int64_t dst_pitch = 0;
  const char* src = nullptr;
  int64_t src_pitch = 0;
  int64_t width = 0;
  int64_t rows = 0;
};

// split: X into each of its outputs `Out`, along the op's `axis`.
std::vector<StridedCopy> SplitCopies(const KernelContext& ctx);
// concat: each input `X` into Out, along the op's `axis`; refuses an Out that aliases an X.
StatusOr<std::vector<StridedCopy>> ConcatCopies(const KernelContext& ctx);

}  // namespace pw::ops
