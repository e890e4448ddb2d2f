// rotary_embedding kernel. The angles' cosines and sines are computed once per call in
// double and rounded to f32; each (batch, position) row then rotates its heads' pairs on
// SIMD vectors, rows split among the kernel threads without changing a bit.

#include <cmath>
#include <vector>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

Status Rotary(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  float* out = ctx.Out("Out")->f32();
  const int64_t seq = x.dim(1), width = x.dim(2);
  const int64_t d = ctx.attrs().GetInt("head_dim"), half = d / 2;
  const double theta = ctx.attrs().GetFloat("theta", kRopeTheta);
  const bool inverse = ctx.attrs().GetBool("inverse", false);
  // cos and sin of position s · theta^(-2i/d), pair i, at [s · half + i].
  std::vector<float> cos(seq * half), sin(seq * half);
  for (int64_t i = 0; i < half; ++i) {
    const double frequency =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    for (int64_t s = 0; s < seq; ++s) {
      const double angle = static_cast<double>(s) * frequency;
      cos[s * half + i] = static_cast<float>(std::cos(angle));
      sin[s * half + i] = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  ParallelFor(rows, RowGrain(width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t s = r % seq;
      for (int64_t head = 0; head < width / d; ++head) {
        const float* in = x.f32() + r * width + head * d;
        float* o = out + r * width + head * d;
        RotateHalvesF32(in, in + half, cos.data() + s * half, sin.data() + s * half, o, o + half,
                        half);
      }
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterRotaryKernels(KernelTable& table) { Add<Rotary>(table, "rotary_embedding"); }

}  // namespace pw::ops::cpu
