#pragma once
// bf16 and f16 storage: conversions to and from f32. Widening is exact; narrowing rounds
// to nearest, ties to even, as tensor cores and PyTorch do; f32 values beyond a type's
// range become infinities and NaNs stay NaNs. Kernels keep low-precision tensors in 16
// bits and compute in f32.

#include <bit>
#include <cstdint>

#include "ir/types.h"
#include "ops/tensor.h"

namespace pw::ops {

inline float Bf16ToFloat(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t FloatToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fffu + ((x >> 16) & 1);  // to nearest, ties to even
  return static_cast<uint16_t>(x >> 16);
}

// IEEE binary16 from and to f32 (subnormals included).
float F16ToFloat(uint16_t h);
uint16_t FloatToF16(float f);

// `n` elements of `dtype` (f32, bf16 or f16) from `src` into f32 `dst`, and back.
void WidenToF32(DataType dtype, const void* src, float* dst, int64_t n);
void NarrowFromF32(DataType dtype, const float* src, void* dst, int64_t n);

// An f32 host copy of a host tensor of f32, bf16 or f16.
Tensor ToF32(const Tensor& t);
// `f32` rounded into `out`, a host tensor of the same shape and of dtype f32, bf16 or f16.
void StoreFromF32(const Tensor& f32, Tensor& out);

}  // namespace pw::ops
