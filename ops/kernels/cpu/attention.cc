// Fused attention on strided per-head views of QKV: column (head, {q,k,v}, d), so head
// h's Q, K and V are [S, d] blocks with leading dim 3·h·d and no copies are needed.

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

struct Layout {
  int64_t b, s, h, d;
  int64_t ld() const { return 3 * h * d; }  // QKV row stride
  int64_t qkv_offset(int64_t batch, int64_t head) const { return batch * s * ld() + head * 3 * d; }
  int64_t out_offset(int64_t batch, int64_t head) const { return batch * s * h * d + head * d; }
  int64_t probs_offset(int64_t batch, int64_t head) const { return (batch * h + head) * s * s; }
};

Layout GetLayout(const KernelContext& ctx) {
  const Tensor& qkv = *ctx.In("QKV");
  int64_t h = ctx.attrs().GetInt("num_heads");
  return Layout{qkv.dim(0), qkv.dim(1), h, qkv.dim(2) / (3 * h)};
}

// Softmax of one score row in place; entries past `valid` are masked to exactly 0.
void SoftmaxRow(float* row, int64_t n, int64_t valid) {
  float mx = row[0];
  for (int64_t j = 1; j < valid; ++j) mx = std::max(mx, row[j]);
  ExpShiftedF32(row, mx, row, valid);
  double sum = 0;
  for (int64_t j = 0; j < valid; ++j) sum += row[j];
  ScaleF32(row, static_cast<float>(1.0 / sum), 0.f, row, valid);
  for (int64_t j = valid; j < n; ++j) row[j] = 0;
}

Status Attention(KernelContext& ctx) {
  Layout l = GetLayout(ctx);
  bool causal = ctx.attrs().GetBool("causal", kAttentionCausal);
  const float* qkv = ctx.In("QKV")->f32();
  float* out = ctx.Out("Out")->f32();
  float* probs = ctx.Out("Probs")->f32();
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.d)));
  for (int64_t b = 0; b < l.b; ++b) {
    for (int64_t h = 0; h < l.h; ++h) {
      const float* q = qkv + l.qkv_offset(b, h);
      const float* k = q + l.d;
      const float* v = q + 2 * l.d;
      float* p = probs + l.probs_offset(b, h);
      Gemm(false, true, l.s, l.s, l.d, scale, q, l.ld(), k, l.ld(), 0, p, l.s);
      for (int64_t i = 0; i < l.s; ++i) SoftmaxRow(p + i * l.s, l.s, causal ? i + 1 : l.s);
      Gemm(false, false, l.s, l.d, l.s, 1, p, l.s, v, l.ld(), 0, out + l.out_offset(b, h),
           l.h * l.d);
    }
  }
  return OkStatus();
}

// dV = P^T·dO; dP = dO·V^T; dS = P ⊙ (dP - rowsum(dP ⊙ P)); dQ = c·dS·K; dK = c·dS^T·Q.
// Masked entries have P = 0, hence dS = 0: causality needs no extra handling.
Status AttentionGrad(KernelContext& ctx) {
  Layout l = GetLayout(ctx);
  const float* qkv = ctx.In("QKV")->f32();
  const float* probs = ctx.In("Probs")->f32();
  const float* dout = ctx.In(GradVarName("Out"))->f32();
  float* dqkv = ctx.Out(GradVarName("QKV"))->f32();
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.d)));
  std::vector<float> ds(l.s * l.s);
  for (int64_t b = 0; b < l.b; ++b) {
    for (int64_t h = 0; h < l.h; ++h) {
      const float* q = qkv + l.qkv_offset(b, h);
      const float* k = q + l.d;
      const float* v = q + 2 * l.d;
      float* dq = dqkv + l.qkv_offset(b, h);
      float* dk = dq + l.d;
      float* dv = dq + 2 * l.d;
      const float* p = probs + l.probs_offset(b, h);
      const float* dO = dout + l.out_offset(b, h);
      int64_t ldo = l.h * l.d;
      Gemm(true, false, l.s, l.d, l.s, 1, p, l.s, dO, ldo, 0, dv, l.ld());
      Gemm(false, true, l.s, l.s, l.d, 1, dO, ldo, v, l.ld(), 0, ds.data(), l.s);
      for (int64_t i = 0; i < l.s; ++i) {
        float* dsr = ds.data() + i * l.s;
        const float* pr = p + i * l.s;
        double dot = 0;
        for (int64_t j = 0; j < l.s; ++j) dot += dsr[j] * pr[j];
        float fdot = static_cast<float>(dot);
        for (int64_t j = 0; j < l.s; ++j) dsr[j] = pr[j] * (dsr[j] - fdot);
      }
      Gemm(false, false, l.s, l.d, l.s, scale, ds.data(), l.s, k, l.ld(), 0, dq, l.ld());
      Gemm(true, false, l.s, l.d, l.s, scale, ds.data(), l.s, q, l.ld(), 0, dk, l.ld());
    }
  }
  return OkStatus();
}

}  // namespace

void RegisterAttentionKernels(KernelTable& table) {
  Add<Attention>(table, "attention");
  Add<AttentionGrad>(table, "attention_grad");
}

}  // namespace pw::ops::cpu
