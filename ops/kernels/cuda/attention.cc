// Fused attention on strided per-head views of QKV (column (head, {q,k,v}, d)), as on
// the CPU: per batch, one strided-batched GEMM over the heads for each product, and the
// row softmax (or its grad) over all heads at once.

#include <cmath>

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

struct Layout {
  int64_t b, s, h, d;
  int64_t ld() const { return 3 * h * d; }  // QKV row stride
  int64_t qkv_offset(int64_t batch) const { return batch * s * ld(); }
  int64_t out_offset(int64_t batch) const { return batch * s * h * d; }
  int64_t probs_offset(int64_t batch) const { return batch * h * s * s; }
  // Between consecutive heads of one batch.
  int64_t qkv_head() const { return 3 * d; }
  int64_t out_head() const { return d; }
  int64_t probs_head() const { return s * s; }
};

Layout GetLayout(const KernelContext& ctx) {
  const Tensor& qkv = *ctx.In("QKV");
  int64_t h = ctx.attrs().GetInt("num_heads");
  return Layout{qkv.dim(0), qkv.dim(1), h, qkv.dim(2) / (3 * h)};
}

float Scale(const Layout& l) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.d)));
}

Status Attention(KernelContext& ctx) {
  Layout l = GetLayout(ctx);
  bool causal = ctx.attrs().GetBool("causal", kAttentionCausal);
  const float* qkv = ctx.In("QKV")->f32();
  float* out = ctx.Out("Out")->f32();
  float* probs = ctx.Out("Probs")->f32();
  const float scale = Scale(l);
  const int64_t ldo = l.h * l.d;
  for (int64_t b = 0; b < l.b; ++b) {
    const float* q = qkv + l.qkv_offset(b);
    const float* k = q + l.d;
    const float* v = q + 2 * l.d;
    float* p = probs + l.probs_offset(b);
    PW_RETURN_IF_ERROR(Gemm(false, true, l.s, l.s, l.d, scale, q, l.ld(), k, l.ld(), 0, p, l.s, l.h,
                            l.qkv_head(), l.qkv_head(), l.probs_head()));
    LaunchSoftmax(p, p, l.h * l.s, l.s, causal ? l.s : 0, CurrentLaunch().stream);
    PW_RETURN_IF_ERROR(Gemm(false, false, l.s, l.d, l.s, 1, p, l.s, v, l.ld(), 0,
                            out + l.out_offset(b), ldo, l.h, l.probs_head(), l.qkv_head(),
                            l.out_head()));
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
  const float scale = Scale(l);
  const int64_t ldo = l.h * l.d;
  // dS of every head of one batch; batches reuse it in stream order.
  PW_ASSIGN_OR_RETURN(Scratch ds_buffer,
                      Scratch::Make(l.h * l.s * l.s * static_cast<int64_t>(sizeof(float))));
  float* ds = static_cast<float*>(ds_buffer.get());
  for (int64_t b = 0; b < l.b; ++b) {
    const float* q = qkv + l.qkv_offset(b);
    const float* k = q + l.d;
    const float* v = q + 2 * l.d;
    float* dq = dqkv + l.qkv_offset(b);
    float* dk = dq + l.d;
    float* dv = dq + 2 * l.d;
    const float* p = probs + l.probs_offset(b);
    const float* dO = dout + l.out_offset(b);
    PW_RETURN_IF_ERROR(Gemm(true, false, l.s, l.d, l.s, 1, p, l.s, dO, ldo, 0, dv, l.ld(), l.h,
                            l.probs_head(), l.out_head(), l.qkv_head()));
    PW_RETURN_IF_ERROR(Gemm(false, true, l.s, l.s, l.d, 1, dO, ldo, v, l.ld(), 0, ds, l.s, l.h,
                            l.out_head(), l.qkv_head(), l.probs_head()));
    LaunchSoftmaxGrad(p, ds, ds, l.h * l.s, l.s, CurrentLaunch().stream);
    PW_RETURN_IF_ERROR(Gemm(false, false, l.s, l.d, l.s, scale, ds, l.s, k, l.ld(), 0, dq, l.ld(),
                            l.h, l.probs_head(), l.qkv_head(), l.qkv_head()));
    PW_RETURN_IF_ERROR(Gemm(true, false, l.s, l.d, l.s, scale, ds, l.s, q, l.ld(), 0, dk, l.ld(),
                            l.h, l.probs_head(), l.qkv_head(), l.qkv_head()));
  }
  return OkStatus();
}

}  // namespace

void RegisterAttentionKernels(KernelTable& table) {
  Add<Attention>(table, "attention");
  Add<AttentionGrad>(table, "attention_grad");
}

}  // namespace pw::ops::cuda
