// Grouped-query attention on strided per-head views of Q, K and V, as on the CPU. Query
// head kv·r + j (r = num_heads / kv_heads) reads kv head kv, so for each j one strided-
// batched GEMM over the kv heads covers query heads j, r + j, 2r + j, ...; the row softmax
// (or its grad) runs over every head at once. A kv head's gradients sum over its query
// heads in head order: j = 0 writes them (beta 0), the others add (beta 1).

#include <cmath>

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

struct Layout {
  int64_t b, s, h, g, d;
  int64_t r() const { return h / g; }
  int64_t ldq() const { return h * d; }  // Q, Out and their gradients
  int64_t ldk() const { return g * d; }  // K, V and their gradients
  int64_t ss() const { return s * s; }
  int64_t q_batch(int64_t batch) const { return batch * s * ldq(); }
  int64_t kv_batch(int64_t batch) const { return batch * s * ldk(); }
  int64_t probs_batch(int64_t batch) const { return batch * h * ss(); }
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
  const bool causal = ctx.attrs().GetBool("causal", kAttentionCausal);
  const float scale = Scale(l);
  for (int64_t b = 0; b < l.b; ++b) {
    const float* q = ctx.In("Q")->f32() + l.q_batch(b);
    const float* k = ctx.In("K")->f32() + l.kv_batch(b);
    const float* v = ctx.In("V")->f32() + l.kv_batch(b);
    float* p = ctx.Out("Probs")->f32() + l.probs_batch(b);
    float* out = ctx.Out("Out")->f32() + l.q_batch(b);
    for (int64_t j = 0; j < l.r(); ++j)
      PW_RETURN_IF_ERROR(Gemm(false, true, l.s, l.s, l.d, scale, q + j * l.d, l.ldq(), k, l.ldk(),
                              0, p + j * l.ss(), l.s, l.g, l.r() * l.d, l.d, l.r() * l.ss()));
    LaunchSoftmax(p, p, l.h * l.s, l.s, causal ? l.s : 0, CurrentLaunch().stream);
    for (int64_t j = 0; j < l.r(); ++j)
      PW_RETURN_IF_ERROR(Gemm(false, false, l.s, l.d, l.s, 1, p + j * l.ss(), l.s, v, l.ldk(), 0,
                              out + j * l.d, l.ldq(), l.g, l.r() * l.ss(), l.d, l.r() * l.d));
  }
  return OkStatus();
}

// dV += P^T·dO; dS = dO·V^T, then P ⊙ (dS - rowsum(dS ⊙ P)); dQ = c·dS·K; dK += c·dS^T·Q.
// Masked entries have P = 0, hence dS = 0: causality needs no extra handling.
Status GqaAttentionGrad(KernelContext& ctx) {
  const Layout l = GetLayout(ctx);
  const float scale = Scale(l);
  Tensor* dq_out = ctx.Out(GradVarName("Q"));
  Tensor* dk_out = ctx.Out(GradVarName("K"));
  Tensor* dv_out = ctx.Out(GradVarName("V"));
  // dS of every head of one batch; batches reuse it in stream order.
  PW_ASSIGN_OR_RETURN(Scratch ds_buffer,
                      Scratch::Make(l.h * l.ss() * static_cast<int64_t>(sizeof(float))));
  float* ds = static_cast<float*>(ds_buffer.get());
  const int64_t ldq = l.ldq(), ldk = l.ldk(), r = l.r();
  for (int64_t b = 0; b < l.b; ++b) {
    const float* q = ctx.In("Q")->f32() + l.q_batch(b);
    const float* k = ctx.In("K")->f32() + l.kv_batch(b);
    const float* v = ctx.In("V")->f32() + l.kv_batch(b);
    const float* p = ctx.In("Probs")->f32() + l.probs_batch(b);
    const float* dO = ctx.In(GradVarName("Out"))->f32() + l.q_batch(b);
    for (int64_t j = 0; j < r; ++j) {
      const float beta = j == 0 ? 0.f : 1.f;
      if (dv_out)
        PW_RETURN_IF_ERROR(Gemm(true, false, l.s, l.d, l.s, 1, p + j * l.ss(), l.s, dO + j * l.d,
                                ldq, beta, dv_out->f32() + l.kv_batch(b), ldk, l.g, r * l.ss(),
                                r * l.d, l.d));
      if (dq_out || dk_out)
        PW_RETURN_IF_ERROR(Gemm(false, true, l.s, l.s, l.d, 1, dO + j * l.d, ldq, v, ldk, 0,
                                ds + j * l.ss(), l.s, l.g, r * l.d, l.d, r * l.ss()));
    }
    if (!dq_out && !dk_out) continue;
    LaunchSoftmaxGrad(p, ds, ds, l.h * l.s, l.s, CurrentLaunch().stream);
    for (int64_t j = 0; j < r; ++j) {
      const float beta = j == 0 ? 0.f : 1.f;
      if (dq_out)
        PW_RETURN_IF_ERROR(Gemm(false, false, l.s, l.d, l.s, scale, ds + j * l.ss(), l.s, k, ldk, 0,
                                dq_out->f32() + l.q_batch(b) + j * l.d, ldq, l.g, r * l.ss(), l.d,
                                r * l.d));
      if (dk_out)
        PW_RETURN_IF_ERROR(Gemm(true, false, l.s, l.d, l.s, scale, ds + j * l.ss(), l.s,
                                q + j * l.d, ldq, beta, dk_out->f32() + l.kv_batch(b), ldk, l.g,
                                r * l.ss(), r * l.d, l.d));
    }
  }
  return OkStatus();
}

}  // namespace

void RegisterGqaAttentionKernels(KernelTable& table) {
  Add<GqaAttention>(table, "gqa_attention");
  Add<GqaAttentionGrad>(table, "gqa_attention_grad");
}

}  // namespace pw::ops::cuda
