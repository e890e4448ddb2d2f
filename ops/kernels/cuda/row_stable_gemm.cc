#include "ops/kernels/cuda/row_stable_gemm.h"

#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>

#include "ops/kernels/cuda/cuda_kernels.h"

namespace pw::ops::cuda {
namespace {

// The M the algorithm is chosen at: as large as a layer's rows get, so that the kernel
// suits the whole product and its blocks still run it.
constexpr int64_t kChoiceRows = 8192;
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr uint32_t kAlignment = 16;

using Key = std::tuple<int, int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t>;

Status LtCheck(cublasStatus_t s, const char* what) { return CublasCheck(s, what); }

// cuBLASLt descriptors of one call; destroyed with it.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Descriptors() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// cuBLAS is column-major: row-major C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ, so
// cuBLAS's first operand is B and its n is our m (see gemm.cc).
Status Describe(cudaDataType_t ab, cudaDataType_t ct, bool trans_a, bool trans_b, int64_t m,
                int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, Descriptors& d) {
  PW_RETURN_IF_ERROR(LtCheck(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                             "cublasLtMatmulDescCreate"));
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  PW_RETURN_IF_ERROR(LtCheck(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                            &op_first, sizeof(op_first)),
                             "cuBLASLt transpose"));
  PW_RETURN_IF_ERROR(LtCheck(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                            &op_second, sizeof(op_second)),
                             "cuBLASLt transpose"));
  PW_RETURN_IF_ERROR(
      LtCheck(cublasLtMatrixLayoutCreate(&d.a, ab, trans_b ? k : n, trans_b ? n : k, ldb),
              "cuBLASLt layout"));
  PW_RETURN_IF_ERROR(
      LtCheck(cublasLtMatrixLayoutCreate(&d.b, ab, trans_a ? m : k, trans_a ? k : m, lda),
              "cuBLASLt layout"));
  return LtCheck(cublasLtMatrixLayoutCreate(&d.c, ct, n, m, ldc), "cuBLASLt layout");
}

cublasLtHandle_t ThreadHandle() {
  thread_local cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) h = nullptr;
    return h;
  }();
  return handle;
}

bool SumsKInOnePass(const cublasLtMatmulAlgo_t& algo) {
  uint32_t splits = 1, reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                           sizeof(splits), &written) != CUBLAS_STATUS_SUCCESS)
    return false;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                           sizeof(reduction), &written) != CUBLAS_STATUS_SUCCESS)
    return false;
  return splits <= 1 && reduction == CUBLASLT_REDUCTION_SCHEME_NONE;
}

// The algorithm for a key, chosen at kChoiceRows rows; Unavailable when none qualifies.
StatusOr<cublasLtMatmulAlgo_t> ChooseAlgo(cublasLtHandle_t lt, const Key& key, cudaDataType_t ab,
                                          cudaDataType_t ct, bool trans_a, bool trans_b, int64_t n,
                                          int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  static std::mutex mu;
  static auto* chosen = new std::map<Key, cublasLtMatmulAlgo_t>;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = chosen->find(key); it != chosen->end()) return it->second;
  // The choice sees the leading dims of the real call, widened where M is (trans_a: A is
  // [k, m], its row length is m).
  const int64_t rows = kChoiceRows;
  Descriptors d;
  PW_RETURN_IF_ERROR(Describe(ab, ct, trans_a, trans_b, rows, n, k,
                              trans_a ? std::max(lda, rows) : lda, ldb, ldc, d));
  cublasLtMatmulPreference_t pref = nullptr;
  PW_RETURN_IF_ERROR(LtCheck(cublasLtMatmulPreferenceCreate(&pref), "cuBLASLt preference"));
  const uint64_t workspace = kWorkspaceBytes;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof(workspace));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &no_reduction, sizeof(no_reduction));
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &kAlignment, sizeof(kAlignment));
  cublasLtMatmulHeuristicResult_t results[16];
  int found = 0;
  cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.c, d.c, pref, 16, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return Unavailable("cuBLASLt found no GEMM algorithm");
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && SumsKInOnePass(results[i].algo)) {
      chosen->emplace(key, results[i].algo);
      return results[i].algo;
    }
  return Unavailable("cuBLASLt has no single-pass GEMM algorithm for this shape");
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

}  // namespace

Status RowStableGemm(DataType ab_dtype, DataType c_dtype, bool trans_a, bool trans_b, int64_t m,
                     int64_t n, int64_t k, float alpha, const void* a, int64_t lda, const void* b,
                     int64_t ldb, float beta, void* c, int64_t ldc) {
  const int64_t ab_size = DataTypeSize(ab_dtype), c_size = DataTypeSize(c_dtype);
  if (!Aligned(a) || !Aligned(b) || !Aligned(c) || (lda * ab_size) % kAlignment ||
      (ldb * ab_size) % kAlignment || (ldc * c_size) % kAlignment)
    return Unavailable("operands not 16-byte aligned");
  cublasLtHandle_t lt = ThreadHandle();
  if (lt == nullptr) return Unavailable("no cuBLASLt handle");
  int device = 0;
  PW_RETURN_IF_ERROR(CudaCheck(cudaGetDevice(&device), "cudaGetDevice"));
  const cudaDataType_t ab = CudaType(ab_dtype), ct = CudaType(c_dtype);
  const Key key{device,
                static_cast<int>(ab),
                static_cast<int>(ct),
                trans_a,
                trans_b,
                n,
                k,
                trans_a ? -1 : lda,
                ldb,
                ldc};
  PW_ASSIGN_OR_RETURN(cublasLtMatmulAlgo_t algo,
                      ChooseAlgo(lt, key, ab, ct, trans_a, trans_b, n, k, lda, ldb, ldc));
  Descriptors d;
  PW_RETURN_IF_ERROR(Describe(ab, ct, trans_a, trans_b, m, n, k, lda, ldb, ldc, d));
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(lt, d.op, d.a, d.b, d.c, d.c, &algo, &check) != CUBLAS_STATUS_SUCCESS)
    return Unavailable("the chosen GEMM algorithm does not take ", m, " rows");
  const size_t workspace = std::min(kWorkspaceBytes, check.workspaceSize);
  PW_ASSIGN_OR_RETURN(Scratch scratch,
                      Scratch::Make(static_cast<int64_t>(std::max<size_t>(workspace, 1))));
  return LtCheck(cublasLtMatmul(lt, d.op, &alpha, b, d.a, a, d.b, &beta, c, d.c, c, d.c, &algo,
                                scratch.get(), workspace, CurrentLaunch().stream),
                 "cublasLtMatmul");
}

}  // namespace pw::ops::cuda
