// Vocabulary-parallel embedding and cross-entropy (ops/defs/vocab_parallel.cc): this rank
// holds rows (or columns) [r·R, (r+1)·R) of the vocabulary, r its index in the op's group.
// Row sums accumulate in double, in order, as the single-rank softmax does.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

Status CheckId(std::string_view op, std::string_view what, int64_t i, int64_t id, int64_t vocab,
               int64_t ignore) {
  if (id != ignore && (id < 0 || id >= vocab))
    return InvalidArgument(op, ": ", what, "[", i, "] = ", id, " is out of range [0, ", vocab, ")");
  return OkStatus();
}

// Rows of ids this rank holds; the others stay zero (a c_allreduce_sum adds the holder's).
Status CEmbedding(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& w = *ctx.In("W");
  Tensor& out = *ctx.Out("Out");
  const int64_t rows = w.dim(0), vocab = ctx.attrs().GetInt("vocab_size");
  const int64_t start = ctx.GroupRank() * rows;
  const int64_t bytes = w.dim(1) * DataTypeSize(w.dtype());  // a gather of any dtype
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids.i64()[i];
    PW_RETURN_IF_ERROR(CheckId("c_embedding", "Ids", i, id, vocab, -1));
    char* dst = static_cast<char*>(out.raw()) + i * bytes;
    if (id >= start && id < start + rows) {
      std::memcpy(dst, static_cast<const char*>(w.raw()) + (id - start) * bytes, bytes);
    } else {
      std::memset(dst, 0, bytes);
    }
  }
  return OkStatus();
}

Status CEmbeddingGrad(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dw = *ctx.Out(GradVarName("W"));
  const int64_t rows = dw.dim(0), h = dw.dim(1), vocab = ctx.attrs().GetInt("vocab_size");
  const int64_t start = ctx.GroupRank() * rows;
  for (int64_t i = 0; i < ids.numel(); ++i)
    PW_RETURN_IF_ERROR(CheckId("c_embedding_grad", "Ids", i, ids.i64()[i], vocab, -1));
  dw.Fill(0);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids.i64()[i];
    if (id < start || id >= start + rows) continue;
    float* row = dw.f32() + (id - start) * h;
    const float* src = g.f32() + i * h;
    for (int64_t j = 0; j < h; ++j) row[j] += src[j];
  }
  return OkStatus();
}

Status ReduceMax(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  float* out = ctx.Out("Out")->f32();
  const int64_t n = x.dim(-1), rows = x.numel() / n;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.f32() + r * n;
    out[r] = MaxF32(row, n);
  }
  return OkStatus();
}

Status SoftmaxStats(KernelContext& ctx) {
  const Tensor& logits = *ctx.In("Logits");
  const float* max = ctx.In("Max")->f32();
  const int64_t* label = ctx.In("Label")->i64();
  float* sum_exp = ctx.Out("SumExp")->f32();
  float* target = ctx.Out("TargetLogit")->f32();
  const int64_t cols = logits.dim(-1), rows = logits.numel() / cols;
  const int64_t start = ctx.GroupRank() * cols;
  const int64_t vocab = ctx.attrs().GetInt("vocab_size");
  const int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r)
    PW_RETURN_IF_ERROR(CheckId("c_softmax_stats", "Label", r, label[r], vocab, ignore));
  std::vector<float> exps(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.f32() + r * cols;
    ExpShiftedF32(x, max[r], exps.data(), cols);
    sum_exp[r] = static_cast<float>(SumF32(exps.data(), cols));
    const int64_t local = label[r] - start;
    target[r] = local >= 0 && local < cols ? x[local] - max[r] : 0.f;
  }
  return OkStatus();
}

Status CSoftmaxCrossEntropy(KernelContext& ctx) {
  const Tensor& logits = *ctx.In("Logits");
  const float* max = ctx.In("Max")->f32();
  const float* sum_exp = ctx.In("SumExp")->f32();
  const float* target = ctx.In("TargetLogit")->f32();
  const int64_t* label = ctx.In("Label")->i64();
  float* loss = ctx.Out("Loss")->f32();
  float* probs = ctx.Out("Softmax")->f32();
  const int64_t cols = logits.dim(-1), rows = logits.numel() / cols;
  const int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.f32() + r * cols;
    float* p = probs + r * cols;
    const float inv = static_cast<float>(1.0 / sum_exp[r]);
    ExpShiftedF32(x, max[r], p, cols);
    ScaleF32(p, inv, 0.f, p, cols);
    loss[r] = label[r] == ignore
                  ? 0.f
                  : static_cast<float>(std::log(double{sum_exp[r]}) - double{target[r]});
  }
  return OkStatus();
}

Status CSoftmaxCrossEntropyGrad(KernelContext& ctx) {
  const Tensor& probs = *ctx.In("Softmax");
  const int64_t* label = ctx.In("Label")->i64();
  const float* dloss = ctx.In(GradVarName("Loss"))->f32();
  float* dlogits = ctx.Out(GradVarName("Logits"))->f32();
  const int64_t cols = probs.dim(-1), rows = probs.numel() / cols;
  const int64_t start = ctx.GroupRank() * cols;
  const int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r)
    CrossEntropyGradRow(probs.f32() + r * cols, cols, label[r] == ignore, dloss[r],
                        label[r] - start, dlogits + r * cols);
  return OkStatus();
}

}  // namespace

void RegisterVocabParallelKernels(KernelTable& table) {
  AddNative<CEmbedding>(table, "c_embedding");
  Add<CEmbeddingGrad>(table, "c_embedding_grad");
  Add<ReduceMax>(table, "reduce_max");
  Add<SoftmaxStats>(table, "c_softmax_stats");
  Add<CSoftmaxCrossEntropy>(table, "c_softmax_cross_entropy");
  Add<CSoftmaxCrossEntropyGrad>(table, "c_softmax_cross_entropy_grad");
}

}  // namespace pw::ops::cpu
