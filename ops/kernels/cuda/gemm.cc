// Row-major GEMM on cuBLAS, which is column-major: a row-major matrix with leading dim ld
// is its transpose in column-major with the same ld, so C = op(A)·op(B) is computed as
// Cᵀ = op(B)ᵀ·op(A)ᵀ, i.e. cuBLAS gets B before A and n before m, flags unchanged.

#include <climits>

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/row_stable_gemm.h"

namespace pw::ops::cuda {
namespace {

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

// C[m, n] (leading dim ldc) = beta · C for beta 0 or 1: what a product over k = 0 leaves.
Status ScaleEmpty(int64_t m, int64_t n, float beta, float* c, int64_t ldc, int64_t batch,
                  int64_t stride_c) {
  if (beta == 1) return OkStatus();
  if (beta != 0) return Internal("GEMM with k = 0 supports beta 0 or 1, got ", beta);
  for (int64_t b = 0; b < batch; ++b) {
    PW_RETURN_IF_ERROR(CudaCheck(cudaMemset2DAsync(c + b * stride_c, ldc * sizeof(float), 0,
                                                   n * sizeof(float), m, CurrentLaunch().stream),
                                 "zero fill"));
  }
  return OkStatus();
}

}  // namespace

Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  if (m == 0 || n == 0 || batch == 0) return OkStatus();
  if (k == 0) return ScaleEmpty(m, n, beta, c, ldc, batch, stride_c);
  for (int64_t v : {m, n, k, lda, ldb, ldc, batch})
    if (!FitsInt(v)) return Unimplemented("GEMM dimension ", v, " exceeds cuBLAS's int range");
  const LaunchContext& launch = CurrentLaunch();
  if (batch == 1) {
    // Single products may be cut into row blocks by the overlap passes: same bits per row.
    Status stable = RowStableGemm(DataType::kFloat32, DataType::kFloat32, trans_a, trans_b, m, n, k,
                                  alpha, a, lda, b, ldb, beta, c, ldc);
    if (stable.code() != StatusCode::kUnavailable) return stable;
  }
  PW_RETURN_IF_ERROR(CublasCheck(cublasSetStream(launch.blas, launch.stream), "cublasSetStream"));
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    return CublasCheck(
        cublasSgemm(launch.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                    &beta, c, static_cast<int>(ldc)),
        "cublasSgemm");
  }
  return CublasCheck(
      cublasSgemmStridedBatched(launch.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                static_cast<int>(k), &alpha, b, static_cast<int>(ldb), stride_b, a,
                                static_cast<int>(lda), stride_a, &beta, c, static_cast<int>(ldc),
                                stride_c, static_cast<int>(batch)),
      "cublasSgemmStridedBatched");
}

cudaDataType_t CudaType(DataType dtype) {
  switch (dtype) {
    case DataType::kBFloat16:
      return CUDA_R_16BF;
    case DataType::kFloat16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

Status GemmEx(DataType ab_dtype, DataType c_dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
              int64_t k, float alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
              float beta, void* c, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
              int64_t stride_c) {
  if (m == 0 || n == 0 || batch == 0) return OkStatus();
  const LaunchContext& launch = CurrentLaunch();
  if (k == 0) {
    if (beta == 1) return OkStatus();
    const int64_t elem = DataTypeSize(c_dtype);
    for (int64_t i = 0; i < batch; ++i)
      PW_RETURN_IF_ERROR(CudaCheck(cudaMemset2DAsync(static_cast<char*>(c) + i * stride_c * elem,
                                                     ldc * elem, 0, n * elem, m, launch.stream),
                                   "zero fill"));
    return OkStatus();
  }
  for (int64_t v : {m, n, k, lda, ldb, ldc, batch})
    if (!FitsInt(v)) return Unimplemented("GEMM dimension ", v, " exceeds cuBLAS's int range");
  if (batch == 1) {
    Status stable = RowStableGemm(ab_dtype, c_dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                  ldb, beta, c, ldc);
    if (stable.code() != StatusCode::kUnavailable) return stable;
  }
  PW_RETURN_IF_ERROR(CublasCheck(cublasSetStream(launch.blas, launch.stream), "cublasSetStream"));
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t ab = CudaType(ab_dtype), ct = CudaType(c_dtype);
  if (batch == 1) {
    return CublasCheck(
        cublasGemmEx(launch.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                     static_cast<int>(k), &alpha, b, ab, static_cast<int>(ldb), a, ab,
                     static_cast<int>(lda), &beta, c, ct, static_cast<int>(ldc), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }
  return CublasCheck(
      cublasGemmStridedBatchedEx(launch.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                 static_cast<int>(k), &alpha, b, ab, static_cast<int>(ldb),
                                 stride_b, a, ab, static_cast<int>(lda), stride_a, &beta, c, ct,
                                 static_cast<int>(ldc), stride_c, static_cast<int>(batch),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

}  // namespace pw::ops::cuda
