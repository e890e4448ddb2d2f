// matmul and matmul_weight_grad on cuBLAS, as the GEMMs ops/defs/matmul_gemm.h plans (the
// CPU kernels' products, and the same accumulation order over batches). bf16 and f16
// operands go to the tensor cores through cublasGemmEx with f32 accumulation; a sum over
// batches accumulates in an f32 scratch and is rounded once, as on the CPU.

#include <optional>

#include "ops/defs/matmul_gemm.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

// `beta` scales what C holds before a GEMM without a sum over batches adds into it (1: C
// += the product, in cuBLAS's epilogue); a sum over batches starts from zero.
Status RunGemm(const StridedGemm& g, float beta = 0) {
  if (!g.accumulate)
    return Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1, g.a, g.lda, g.b, g.ldb, beta, g.c, g.ldc,
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

// The plan only stores its pointers and counts its steps in elements: for 2-byte dtypes
// the offsets are scaled here. C is `out_dtype`: the operands' dtype, or f32 (the weight
// gradient's f32 sums, out_dtype=f32), which a sum over batches accumulates into directly.
// `beta` as RunGemm's.
Status RunGemmLow(const StridedGemm& g, DataType dtype, DataType out_dtype, float beta = 0) {
  const void* a = g.a;
  const void* b = g.b;
  void* c = g.c;
  if (!g.accumulate)
    return GemmEx(dtype, out_dtype, g.trans_a, g.trans_b, g.m, g.n, g.k, 1, a, g.lda, b, g.ldb,
                  beta, c, g.ldc, g.batch, g.a_step, g.b_step, g.c_step);
  const int64_t elem = DataTypeSize(dtype);
  const int64_t count = g.m * g.ldc;
  const bool wide = out_dtype == DataType::kFloat32;
  std::optional<Scratch> sum;  // the f32 sums of a 16-bit C
  if (!wide) {
    PW_ASSIGN_OR_RETURN(Scratch made, Scratch::Make(count * int64_t{sizeof(float)}));
    sum.emplace(std::move(made));
  }
  auto* acc = static_cast<float*>(wide ? c : sum->get());
  const cudaStream_t stream = CurrentLaunch().stream;
  if (g.batch == 0)
    PW_RETURN_IF_ERROR(CudaCheck(cudaMemsetAsync(acc, 0, count * sizeof(float), stream), "zero"));
  for (int64_t i = 0; i < g.batch; ++i)
    PW_RETURN_IF_ERROR(GemmEx(dtype, DataType::kFloat32, g.trans_a, g.trans_b, g.m, g.n, g.k, 1,
                              static_cast<const char*>(a) + i * g.a_step * elem, g.lda,
                              static_cast<const char*>(b) + i * g.b_step * elem, g.ldb,
                              i > 0 ? 1.f : 0.f, acc, g.ldc));
  if (!wide) LaunchNarrowFromF32(dtype == DataType::kBFloat16, acc, c, count, stream);
  return OkStatus();
}

Status Matmul(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& y = *ctx.In("Y");
  Tensor& out = *ctx.Out("Out");
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  PW_ASSIGN_OR_RETURN(MatmulDims d, ComputeMatmulDims("matmul", x.shape(), y.shape(), tx, ty));
  StridedGemm g = MatmulGemm(d, tx, ty, x.f32(), y.f32(), out.f32());
  return IsLowPrecision(x.dtype()) ? RunGemmLow(g, x.dtype(), out.dtype()) : RunGemm(g);
}

// dY = sum_b op(X_b)^T · G_b, or its transpose when trans_y; with Acc (f32), dY = Acc +
// that sum. One GEMM over the whole product (no sum over batches) adds Acc in cuBLAS's
// epilogue (beta = 1: the f32 product plus Acc, rounded once, as a separate add rounds it);
// a sum over batches is completed in a scratch first and then added.
Status MatmulWeightGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dy = *ctx.Out(GradVarName("Y"));
  const Tensor* acc = ctx.In("Acc");
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  StridedGemm p = MatmulWeightGradGemm(x.shape(), g.dim(-1), tx, ty, x.f32(), g.f32(), dy.f32());
  auto run = [&](const StridedGemm& gemm, float beta) {
    return IsLowPrecision(x.dtype()) ? RunGemmLow(gemm, x.dtype(), dy.dtype(), beta)
                                     : RunGemm(gemm, beta);
  };
  if (!acc) return run(p, 0);
  const cudaStream_t stream = CurrentLaunch().stream;
  const int64_t bytes = dy.numel() * int64_t{sizeof(float)};
  if (!p.accumulate && p.batch == 1) {
    if (acc->f32() != dy.f32())
      PW_RETURN_IF_ERROR(CudaCheck(
          cudaMemcpyAsync(dy.f32(), acc->f32(), bytes, cudaMemcpyDeviceToDevice, stream), "Acc"));
    return run(p, 1);
  }
  PW_ASSIGN_OR_RETURN(Scratch sum, Scratch::Make(bytes));
  p.c = static_cast<float*>(sum.get());
  PW_RETURN_IF_ERROR(run(p, 0));
  LaunchAdd(acc->f32(), p.c, dy.f32(), dy.numel(), stream);
  return OkStatus();
}

}  // namespace

void RegisterMatmulKernels(KernelTable& table) {
  AddNative<Matmul>(table, "matmul");
  AddNative<MatmulWeightGrad>(table, "matmul_weight_grad");
}

}  // namespace pw::ops::cuda
