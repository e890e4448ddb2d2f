// embedding gather and its scatter-add grad; ids are checked, never trusted.

#include <algorithm>
#include <cstring>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

Status CheckId(std::string_view op, int64_t i, int64_t id, int64_t vocab) {
  if (id < 0 || id >= vocab) {
    return InvalidArgument(op, ": Ids[", i, "] = ", id, " is out of range [0, ", vocab, ")");
  }
  return OkStatus();
}

Status Embedding(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& w = *ctx.In("W");
  Tensor& out = *ctx.Out("Out");
  int64_t vocab = w.dim(0);
  const int64_t row = w.dim(1) * DataTypeSize(w.dtype());  // bytes: a gather of any dtype
  for (int64_t i = 0; i < ids.numel(); ++i) {
    int64_t id = ids.i64()[i];
    PW_RETURN_IF_ERROR(CheckId("embedding", i, id, vocab));
    std::memcpy(static_cast<char*>(out.raw()) + i * row,
                static_cast<const char*>(w.raw()) + id * row, row);
  }
  return OkStatus();
}

// Rows are added in token order, so repeated ids sum deterministically.
Status EmbeddingGrad(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dw = *ctx.Out(GradVarName("W"));
  int64_t vocab = dw.dim(0), h = dw.dim(1);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    PW_RETURN_IF_ERROR(CheckId("embedding_grad", i, ids.i64()[i], vocab));
  }
  // Threads take ranges of columns: every element still adds its tokens in order.
  const int64_t tokens = ids.numel();
  ParallelFor(h, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(tokens, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = 0; r < vocab; ++r)
                  std::fill(dw.f32() + r * h + begin, dw.f32() + r * h + end, 0.f);
                for (int64_t i = 0; i < tokens; ++i) {
                  float* row = dw.f32() + ids.i64()[i] * h;
                  const float* src = g.f32() + i * h;
                  AddF32(row + begin, src + begin, row + begin, end - begin);
                }
              });
  return OkStatus();
}

}  // namespace

void RegisterEmbeddingKernels(KernelTable& table) {
  AddNative<Embedding>(table, "embedding");
  Add<EmbeddingGrad>(table, "embedding_grad");
}

}  // namespace pw::ops::cpu
