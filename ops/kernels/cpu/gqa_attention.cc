// Grouped-query attention on strided per-head views of Q, K and V (head h in columns
// [h·d, (h+1)·d)), with the causal row blocks of the attention kernels (causal_blocks.h): rows
// [r0, r1) see keys [0, r1) only. Forward, query heads are independent and run on the
// kernel threads; backward, a kv head's gradients sum over its query heads, so each kv head
// is one task that adds its query heads in head order: the same bits at any thread count.

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
  int64_t b, s, h, g, d;
  int64_t ldq() const { return h * d; }  // Q, Out and their gradients
  int64_t ldk() const { return g * d; }  // K, V and their gradients
  int64_t group_size() const { return h / g; }
  int64_t q_offset(int64_t batch, int64_t head) const { return batch * s * ldq() + head * d; }
  int64_t kv_offset(int64_t batch, int64_t kv) const { return batch * s * ldk() + kv * d; }
  int64_t probs_offset(int64_t batch, int64_t head) const { return (batch * h + head) * s * s; }
};

Layout GetLayout(const KernelContext& ctx) {
  const Tensor& q = *ctx.In("Q");
  const int64_t h = ctx.attrs().GetInt("num_heads"), g = ctx.attrs().GetInt("kv_heads");
  return Layout{q.dim(0), q.dim(1), h, g, q.dim(2) / h};
}

float Scale(const Layout& l) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.d)));
}

Status GqaAttention(KernelContext& ctx) {
  const Layout l = GetLayout(ctx);
  const Blocks blocks = GetBlocks(ctx, l.s);
  const float* qs = ctx.In("Q")->f32();
  const float* ks = ctx.In("K")->f32();
  const float* vs = ctx.In("V")->f32();
  float* out = ctx.Out("Out")->f32();
  float* probs = ctx.Out("Probs")->f32();
  const float scale = Scale(l);
  ParallelFor(l.b * l.h, MacGrain(HeadMacs(l.s, l.d, blocks)), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / l.h, head = task % l.h, kv = head / l.group_size();
      const float* q = qs + l.q_offset(b, head);
      const float* k = ks + l.kv_offset(b, kv);
      const float* v = vs + l.kv_offset(b, kv);
      float* p = probs + l.probs_offset(b, head);
      float* o = out + l.q_offset(b, head);
      for (int64_t r0 = 0; r0 < l.s; r0 += blocks.size) {
        const int64_t r1 = std::min(l.s, r0 + blocks.size), keys = blocks.keys(r1, l.s);
        Gemm(false, true, r1 - r0, keys, l.d, scale, q + r0 * l.ldq(), l.ldq(), k, l.ldk(), 0,
             p + r0 * l.s, l.s);
        for (int64_t i = r0; i < r1; ++i)  // in place; masked entries exactly 0
          SoftmaxRowF32(p + i * l.s, p + i * l.s, l.s, blocks.causal ? i + 1 : l.s, nullptr);
        Gemm(false, false, r1 - r0, l.d, keys, 1, p + r0 * l.s, l.s, v, l.ldk(), 0,
             o + r0 * l.ldq(), l.ldq());
      }
    }
  });
  return OkStatus();
}

// Per query head: dV += P^T·dO; dP = dO·V^T; dS = P ⊙ (dP - rowsum(dP ⊙ P)); dQ = c·dS·K;
// dK += c·dS^T·Q. The first query head of a group writes dK and dV (beta 0), the others add
// to them (beta 1). Masked entries have P = 0, hence dS = 0: the blocks skip them.
Status GqaAttentionGrad(KernelContext& ctx) {
  const Layout l = GetLayout(ctx);
  const Blocks blocks = GetBlocks(ctx, l.s);
  const float* qs = ctx.In("Q")->f32();
  const float* ks = ctx.In("K")->f32();
  const float* vs = ctx.In("V")->f32();
  const float* probs = ctx.In("Probs")->f32();
  const float* dout = ctx.In(GradVarName("Out"))->f32();
  Tensor* dq_out = ctx.Out(GradVarName("Q"));
  Tensor* dk_out = ctx.Out(GradVarName("K"));
  Tensor* dv_out = ctx.Out(GradVarName("V"));
  const float scale = Scale(l);
  // Key block [c0, c1) is seen by queries [first_query(c0), s).
  auto for_key_blocks = [&](auto&& body) {
    for (int64_t c0 = 0; c0 < l.s; c0 += blocks.size)
      body(c0, std::min(l.s, c0 + blocks.size), blocks.first_query(c0));
  };
  const int64_t macs_per_task = 2 * l.group_size() * HeadMacs(l.s, l.d, blocks);
  ParallelFor(l.b * l.g, MacGrain(macs_per_task), [&](int64_t begin, int64_t end) {
    std::vector<float> ds(l.s * l.s);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / l.g, kv = task % l.g;
      const float* k = ks + l.kv_offset(b, kv);
      const float* v = vs + l.kv_offset(b, kv);
      float* dk = dk_out ? dk_out->f32() + l.kv_offset(b, kv) : nullptr;
      float* dv = dv_out ? dv_out->f32() + l.kv_offset(b, kv) : nullptr;
      for (int64_t j = 0; j < l.group_size(); ++j) {
        const int64_t head = kv * l.group_size() + j;
        const float beta = j == 0 ? 0.f : 1.f;
        const float* q = qs + l.q_offset(b, head);
        const float* p = probs + l.probs_offset(b, head);
        const float* dO = dout + l.q_offset(b, head);
        if (dv)
          for_key_blocks([&](int64_t c0, int64_t c1, int64_t q0) {
            Gemm(true, false, c1 - c0, l.d, l.s - q0, 1, p + q0 * l.s + c0, l.s, dO + q0 * l.ldq(),
                 l.ldq(), beta, dv + c0 * l.ldk(), l.ldk());
          });
        if (!dq_out && !dk) continue;
        for (int64_t r0 = 0; r0 < l.s; r0 += blocks.size) {
          const int64_t r1 = std::min(l.s, r0 + blocks.size), keys = blocks.keys(r1, l.s);
          float* dsb = ds.data() + r0 * l.s;
          Gemm(false, true, r1 - r0, keys, l.d, 1, dO + r0 * l.ldq(), l.ldq(), v, l.ldk(), 0, dsb,
               l.s);
          for (int64_t i = r0; i < r1; ++i) {
            float* dsr = ds.data() + i * l.s;
            const float* pr = p + i * l.s;
            const int64_t valid = blocks.causal ? i + 1 : l.s;
            const float dot = static_cast<float>(DotF32(dsr, pr, valid));
            MulDifferenceF32(pr, dsr, dot, dsr, valid);
            std::fill(dsr + valid, dsr + l.s, 0.f);
          }
          if (dq_out)
            Gemm(false, false, r1 - r0, l.d, keys, scale, dsb, l.s, k, l.ldk(), 0,
                 dq_out->f32() + l.q_offset(b, head) + r0 * l.ldq(), l.ldq());
        }
        if (dk)
          for_key_blocks([&](int64_t c0, int64_t c1, int64_t q0) {
            Gemm(true, false, c1 - c0, l.d, l.s - q0, scale, ds.data() + q0 * l.s + c0, l.s,
                 q + q0 * l.ldq(), l.ldq(), beta, dk + c0 * l.ldk(), l.ldk());
          });
      }
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterGqaAttentionKernels(KernelTable& table) {
  Add<GqaAttention>(table, "gqa_attention");
  Add<GqaAttentionGrad>(table, "gqa_attention_grad");
}

}  // namespace pw::ops::cpu
