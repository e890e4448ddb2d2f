// matmul and matmul_weight_grad on the CPU GEMM (gemm.cc), as ops/defs/matmul_gemm.h plans.
// Batches run one after another, so the result never depends on the thread count.

#include <algorithm>

#include "ops/defs/matmul_gemm.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

void RunGemm(const StridedGemm& g) {
  if (g.batch == 0 && g.accumulate) std::fill_n(g.c, g.m * g.ldc, 0.f);
  for (int64_t i = 0; i < g.batch; ++i)
    Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1, g.a + i * g.a_step, g.lda, g.b + i * g.b_step,
         g.ldb, g.accumulate && i > 0 ? 1.f : 0.f, g.c + i * g.c_step, g.ldc);
}

Status Matmul(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& y = *ctx.In("Y");
  Tensor& out = *ctx.Out("Out");
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  PW_ASSIGN_OR_RETURN(MatmulDims d, ComputeMatmulDims("matmul", x.shape(), y.shape(), tx, ty));
  RunGemm(MatmulGemm(d, tx, ty, x.f32(), y.f32(), out.f32()));
  return OkStatus();
}

// dY = sum_b op(X_b)^T · G_b, or its transpose when trans_y; with Acc, dY = Acc + that
// sum, added after it is complete (the bits of the executor's separate accumulation).
Status MatmulWeightGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dy = *ctx.Out(GradVarName("Y"));
  const Tensor* acc = ctx.In("Acc");
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  if (!acc) {
    RunGemm(MatmulWeightGradGemm(x.shape(), g.dim(-1), tx, ty, x.f32(), g.f32(), dy.f32()));
    return OkStatus();
  }
  // The GEMM writes every element (beta 0): zeroing it first cost a pass over every weight
  // gradient per micro-batch (~10 % of a large GPT's step on one process).
  Tensor sum = Tensor::Allocated(DataType::kFloat32, dy.shape(), /*zeroed=*/false);
  RunGemm(MatmulWeightGradGemm(x.shape(), g.dim(-1), tx, ty, x.f32(), g.f32(), sum.f32()));
  const float* a = acc->f32();  // may be dY itself
  const float* p = sum.f32();
  float* out = dy.f32();
  ParallelFor(dy.numel(), kCheapGrain,
              [&](int64_t b, int64_t e) { AddF32(a + b, p + b, out + b, e - b); });
  return OkStatus();
}

}  // namespace

void RegisterMatmulKernels(KernelTable& table) {
  Add<Matmul>(table, "matmul");
  Add<MatmulWeightGrad>(table, "matmul_weight_grad");
}

}  // namespace pw::ops::cpu
