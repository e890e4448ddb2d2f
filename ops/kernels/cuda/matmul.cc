// matmul and matmul_weight_grad on cuBLAS, with the CPU kernels' problem split: the same
// products, the same accumulation order over batches.

#include <algorithm>

#include "ops/defs/matmul_dims.h"
#include "ops/kernels/cuda/cuda_kernels.h"

namespace pw::ops::cuda {
namespace {

Status Matmul(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& y = *ctx.In("Y");
  Tensor& out = *ctx.Out("Out");
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  PW_ASSIGN_OR_RETURN(MatmulDims d, ComputeMatmulDims("matmul", x.shape(), y.shape(), tx, ty));
  int64_t lda = tx ? d.m : d.k;
  int64_t ldb = ty ? d.k : d.n;
  if (d.x_batched && !d.y_batched && !tx) {
    // A shared Y: fold the batch into M for one large GEMM.
    return Gemm(false, ty, d.batch * d.m, d.n, d.k, 1, x.f32(), lda, y.f32(), ldb, 0, out.f32(),
                d.n);
  }
  int64_t x_step = d.x_batched ? d.m * d.k : 0;
  int64_t y_step = d.y_batched ? d.k * d.n : 0;
  return Gemm(tx, ty, d.m, d.n, d.k, 1, x.f32(), lda, y.f32(), ldb, 0, out.f32(), d.n, d.batch,
              x_step, y_step, d.m * d.n);
}

// dY = sum_b op(X_b)^T · G_b, or its transpose when trans_y.
Status MatmulWeightGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dy = *ctx.Out(GradVarName("Y"));
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  int64_t m = tx ? x.dim(-1) : x.dim(-2);
  int64_t k = tx ? x.dim(-2) : x.dim(-1);
  int64_t n = g.dim(-1);
  int64_t batch = x.numel() / std::max<int64_t>(1, m * k);
  if (!tx) {
    // X rows are contiguous: one GEMM over all B·M rows.
    int64_t rows = batch * m;
    if (!ty) return Gemm(true, false, k, n, rows, 1, x.f32(), k, g.f32(), n, 0, dy.f32(), n);
    return Gemm(true, false, n, k, rows, 1, g.f32(), n, x.f32(), k, 0, dy.f32(), k);
  }
  if (batch == 0)
    return CudaCheck(cudaMemsetAsync(dy.raw(), 0, dy.nbytes(), CurrentLaunch().stream),
                     "zero fill");
  // Summed over batches one GEMM after another (beta = 1), as the CPU does.
  for (int64_t b = 0; b < batch; ++b) {
    const float* xb = x.f32() + b * k * m;  // [K, M]
    const float* gb = g.f32() + b * m * n;  // [M, N]
    float beta = b == 0 ? 0.f : 1.f;
    if (!ty) {
      PW_RETURN_IF_ERROR(Gemm(false, false, k, n, m, 1, xb, m, gb, n, beta, dy.f32(), n));
    } else {
      PW_RETURN_IF_ERROR(Gemm(true, true, n, k, m, 1, gb, n, xb, m, beta, dy.f32(), k));
    }
  }
  return OkStatus();
}

}  // namespace

void RegisterMatmulKernels(KernelTable& table) {
  Add<Matmul>(table, "matmul");
  Add<MatmulWeightGrad>(table, "matmul_weight_grad");
}

}  // namespace pw::ops::cuda
