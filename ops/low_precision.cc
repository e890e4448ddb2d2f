#include "ops/low_precision.h"

#include <cstring>

#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops {

// After F. Giesen's branch-light conversions: the exponent is rebiased with integer
// arithmetic, and f32 additions (which round to nearest even) place subnormals.
float F16ToFloat(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t bits = (uint32_t{h} & 0x7fffu) << 13;
  const uint32_t exp = bits & kShiftedExp;
  bits += (127 - 15) << 23;
  if (exp == kShiftedExp) {
    bits += (128 - 16) << 23;  // infinity or NaN
  } else if (exp == 0) {
    bits += 1 << 23;  // zero or subnormal: renormalise
    bits = std::bit_cast<uint32_t>(std::bit_cast<float>(bits) -
                                   std::bit_cast<float>(uint32_t{113} << 23));
  }
  return std::bit_cast<float>(bits | (uint32_t{h} & 0x8000u) << 16);
}

uint16_t FloatToF16(float f) {
  constexpr uint32_t kInf = 255u << 23;
  constexpr uint32_t kF16Overflow = (127u + 16) << 23;  // 2^16: rounds to infinity
  constexpr uint32_t kDenormMagic = ((127u - 15) + (23 - 10) + 1) << 23;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint32_t out;
  if (bits >= kF16Overflow) {
    out = bits > kInf ? 0x7e00u : 0x7c00u;
  } else if (bits < (113u << 23)) {
    // Below the smallest normal f16: the addition rounds the mantissa into place.
    float sum = std::bit_cast<float>(bits) + std::bit_cast<float>(kDenormMagic);
    out = std::bit_cast<uint32_t>(sum) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (bits >> 13) & 1;
    bits += ((15u - 127u) << 23) + 0xfffu + mant_odd;
    out = bits >> 13;
  }
  return static_cast<uint16_t>(out | sign >> 16);
}

void WidenToF32(DataType dtype, const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  switch (dtype) {
    case DataType::kBFloat16:
      cpu::WidenBf16ToF32(h, dst, n);
      return;
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToFloat(h[i]);
      return;
    default:
      std::memcpy(dst, src, n * sizeof(float));
  }
}

void NarrowFromF32(DataType dtype, const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  switch (dtype) {
    case DataType::kBFloat16:
      cpu::NarrowF32ToBf16(src, h, n);
      return;
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) h[i] = FloatToF16(src[i]);
      return;
    default:
      std::memcpy(dst, src, n * sizeof(float));
  }
}

Tensor ToF32(const Tensor& t) {
  Tensor out(DataType::kFloat32, t.shape());
  WidenToF32(t.dtype(), t.raw(), out.f32(), t.numel());
  return out;
}

void StoreFromF32(const Tensor& f32, Tensor& out) {
  NarrowFromF32(out.dtype(), f32.f32(), out.raw(), out.numel());
}

}  // namespace pw::ops
