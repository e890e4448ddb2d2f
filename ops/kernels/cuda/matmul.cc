// matmul and matmul_weight_grad on cuBLAS, as the GEMMs ops/defs/matmul_gemm.h plans (the
// CPU kernels' products, and the same accumulation order over batches).

#include "ops/defs/matmul_gemm.h"
#include "ops/kernels/cuda/cuda_kernels.h"

namespace pw::ops::cuda {
namespace {

Status RunGemm(const StridedGemm& g) {
  if (!g.accumulate)
    return Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1, g.a, g.lda, g.b, g.ldb, 0, g.c, g.ldc,
                g.batch, g.a_step, g.b_step, g.c_step);
  if (g.batch == 0)
    return CudaCheck(cudaMemsetAsync(g.c, 0, g.m * g.ldc * sizeof(float), CurrentLaunch().stream),
                     "zero fill");
  for (int64_t i = 0; i < g.batch; ++i)
    PW_RETURN_IF_ERROR(Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1, g.a + i * g.a_step, g.lda,
                            g.b + i * g.b_step, g.ldb, i > 0 ? 1.f : 0.f, g.c + i * g.c_step,
                            g.ldc));
  return OkStatus();
}

Status Matmul(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& y = *ctx.In("Y");
  Tensor& out = *ctx.Out("Out");
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  PW_ASSIGN_OR_RETURN(MatmulDims d, ComputeMatmulDims("matmul", x.shape(), y.shape(), tx, ty));
  return RunGemm(MatmulGemm(d, tx, ty, x.f32(), y.f32(), out.f32()));
}

// dY = sum_b op(X_b)^T · G_b, or its transpose when trans_y.
Status MatmulWeightGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dy = *ctx.Out(GradVarName("Y"));
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  return RunGemm(MatmulWeightGradGemm(x.shape(), g.dim(-1), tx, ty, x.f32(), g.f32(), dy.f32()));
}

}  // namespace

void RegisterMatmulKernels(KernelTable& table) {
  Add<Matmul>(table, "matmul");
  Add<MatmulWeightGrad>(table, "matmul_weight_grad");
}

}  // namespace pw::ops::cuda
