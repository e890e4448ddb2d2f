// Fused attention on strided per-head views of QKV: column (head, {q,k,v}, d), so head
// h's Q, K and V are [S, d] blocks with leading dim 3·h·d and no copies are needed.

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/kernels/cpu/causal_blocks.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
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

// Heads are independent: they run on the kernel threads, each head on one thread, so the
// result does not depend on the thread count; a range holds enough heads to pay for waking
// a thread (the backward's four products a head count twice its forward's two).
template <typename Body>
void ForEachHead(const Layout& l, int64_t macs_per_head, Body&& body) {
  ParallelFor(l.b * l.h, MacGrain(macs_per_head), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i / l.h, i % l.h);
  });
}

Status Attention(KernelContext& ctx) {
  const Layout l = GetLayout(ctx);
  const Blocks blocks = GetBlocks(ctx, l.s);
  const float* qkv = ctx.In("QKV")->f32();
  float* out = ctx.Out("Out")->f32();
  float* probs = ctx.Out("Probs")->f32();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.d)));
  const int64_t ldo = l.h * l.d;
  ForEachHead(l, HeadMacs(l.s, l.d, blocks), [&](int64_t b, int64_t h) {
    const float* q = qkv + l.qkv_offset(b, h);
    const float* k = q + l.d;
    const float* v = q + 2 * l.d;
    float* p = probs + l.probs_offset(b, h);
    float* o = out + l.out_offset(b, h);
    for (int64_t r0 = 0; r0 < l.s; r0 += blocks.size) {
      const int64_t r1 = std::min(l.s, r0 + blocks.size), kv = blocks.keys(r1, l.s);
      Gemm(false, true, r1 - r0, kv, l.d, scale, q + r0 * l.ld(), l.ld(), k, l.ld(), 0,
           p + r0 * l.s, l.s);
      for (int64_t i = r0; i < r1; ++i)  // in place; masked entries exactly 0
        SoftmaxRowF32(p + i * l.s, p + i * l.s, l.s, blocks.causal ? i + 1 : l.s, nullptr);
      Gemm(false, false, r1 - r0, l.d, kv, 1, p + r0 * l.s, l.s, v, l.ld(), 0, o + r0 * ldo, ldo);
    }
  });
  return OkStatus();
}

// dV = P^T·dO; dP = dO·V^T; dS = P ⊙ (dP - rowsum(dP ⊙ P)); dQ = c·dS·K; dK = c·dS^T·Q.
// Masked entries have P = 0, hence dS = 0: the blocks skip them.
Status AttentionGrad(KernelContext& ctx) {
  const Layout l = GetLayout(ctx);
  const Blocks blocks = GetBlocks(ctx, l.s);
  const float* qkv = ctx.In("QKV")->f32();
  const float* probs = ctx.In("Probs")->f32();
  const float* dout = ctx.In(GradVarName("Out"))->f32();
  float* dqkv = ctx.Out(GradVarName("QKV"))->f32();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.d)));
  const int64_t ldo = l.h * l.d;
  ForEachHead(l, 2 * HeadMacs(l.s, l.d, blocks), [&](int64_t b, int64_t h) {
    std::vector<float> ds(l.s * l.s);
    const float* q = qkv + l.qkv_offset(b, h);
    const float* k = q + l.d;
    const float* v = q + 2 * l.d;
    float* dq = dqkv + l.qkv_offset(b, h);
    float* dk = dq + l.d;
    float* dv = dq + 2 * l.d;
    const float* p = probs + l.probs_offset(b, h);
    const float* dO = dout + l.out_offset(b, h);
    // Key block [c0, c1) is seen by queries [first_query(c0), s).
    auto for_key_blocks = [&](auto&& body) {
      for (int64_t c0 = 0; c0 < l.s; c0 += blocks.size)
        body(c0, std::min(l.s, c0 + blocks.size), blocks.first_query(c0));
    };
    for_key_blocks([&](int64_t c0, int64_t c1, int64_t q0) {
      Gemm(true, false, c1 - c0, l.d, l.s - q0, 1, p + q0 * l.s + c0, l.s, dO + q0 * ldo, ldo, 0,
           dv + c0 * l.ld(), l.ld());
    });
    for (int64_t r0 = 0; r0 < l.s; r0 += blocks.size) {
      const int64_t r1 = std::min(l.s, r0 + blocks.size), kv = blocks.keys(r1, l.s);
      float* dsb = ds.data() + r0 * l.s;
      Gemm(false, true, r1 - r0, kv, l.d, 1, dO + r0 * ldo, ldo, v, l.ld(), 0, dsb, l.s);
      for (int64_t i = r0; i < r1; ++i) {
        float* dsr = ds.data() + i * l.s;
        const float* pr = p + i * l.s;
        const int64_t valid = blocks.causal ? i + 1 : l.s;
        const float dot = static_cast<float>(DotF32(dsr, pr, valid));
        MulDifferenceF32(pr, dsr, dot, dsr, valid);
        std::fill(dsr + valid, dsr + l.s, 0.f);
      }
      Gemm(false, false, r1 - r0, l.d, kv, scale, dsb, l.s, k, l.ld(), 0, dq + r0 * l.ld(), l.ld());
    }
    for_key_blocks([&](int64_t c0, int64_t c1, int64_t q0) {
      Gemm(true, false, c1 - c0, l.d, l.s - q0, scale, ds.data() + q0 * l.s + c0, l.s,
           q + q0 * l.ld(), l.ld(), 0, dk + c0 * l.ld(), l.ld());
    });
  });
  return OkStatus();
}

}  // namespace

void RegisterAttentionKernels(KernelTable& table) {
  Add<Attention>(table, "attention");
  Add<AttentionGrad>(table, "attention_grad");
}

}  // namespace pw::ops::cpu
