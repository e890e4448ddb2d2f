// Vocabulary-parallel embedding and cross-entropy (host side): this rank's range of the
// vocabulary from its index in the op's group, as on the CPU.

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status CEmbedding(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& w = *ctx.In("W");
  const LaunchContext& l = CurrentLaunch();
  const int64_t rows = w.dim(0);
  LaunchCEmbedding(ids.i64(), w.raw(), ctx.Out("Out")->raw(), ids.numel(), rows,
                   ctx.GroupRank() * rows, ctx.attrs().GetInt("vocab_size"),
                   w.dim(1) * DataTypeSize(w.dtype()), l.error, l.site, l.stream);
  return OkStatus();
}

Status CEmbeddingGrad(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  Tensor& dw = *ctx.Out(GradVarName("W"));
  const LaunchContext& l = CurrentLaunch();
  PW_RETURN_IF_ERROR(CudaCheck(cudaMemsetAsync(dw.raw(), 0, dw.nbytes(), l.stream), "zero fill"));
  const int64_t rows = dw.dim(0);
  LaunchCEmbeddingGrad(ids.i64(), ctx.In(GradVarName("Out"))->f32(), dw.f32(), ids.numel(), rows,
                       ctx.GroupRank() * rows, ctx.attrs().GetInt("vocab_size"), dw.dim(1), l.error,
                       l.site, l.stream);
  return OkStatus();
}

Status ReduceMax(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const int64_t n = x.dim(-1);
  LaunchReduceMax(x.f32(), ctx.Out("Out")->f32(), n == 0 ? 0 : x.numel() / n, n,
                  CurrentLaunch().stream);
  return OkStatus();
}

Status SoftmaxStats(KernelContext& ctx) {
  const Tensor& logits = *ctx.In("Logits");
  const LaunchContext& l = CurrentLaunch();
  const int64_t cols = logits.dim(-1);
  LaunchSoftmaxStats(logits.f32(), ctx.In("Max")->f32(), ctx.In("Label")->i64(),
                     ctx.Out("SumExp")->f32(), ctx.Out("TargetLogit")->f32(),
                     cols == 0 ? 0 : logits.numel() / cols, cols, ctx.GroupRank() * cols,
                     ctx.attrs().GetInt("vocab_size"),
                     ctx.attrs().GetInt("ignore_index", kIgnoreIndex), l.error, l.site, l.stream);
  return OkStatus();
}

Status CSoftmaxCrossEntropy(KernelContext& ctx) {
  const Tensor& logits = *ctx.In("Logits");
  const int64_t cols = logits.dim(-1);
  LaunchCSoftmaxCrossEntropy(
      logits.f32(), ctx.In("Max")->f32(), ctx.In("SumExp")->f32(), ctx.In("TargetLogit")->f32(),
      ctx.In("Label")->i64(), ctx.Out("Loss")->f32(), ctx.Out("Softmax")->f32(),
      cols == 0 ? 0 : logits.numel() / cols, cols, ctx.attrs().GetInt("ignore_index", kIgnoreIndex),
      CurrentLaunch().stream);
  return OkStatus();
}

Status CSoftmaxCrossEntropyGrad(KernelContext& ctx) {
  const Tensor& probs = *ctx.In("Softmax");
  const int64_t cols = probs.dim(-1);
  LaunchCSoftmaxCrossEntropyGrad(
      probs.f32(), ctx.In("Label")->i64(), ctx.In(GradVarName("Loss"))->f32(),
      ctx.Out(GradVarName("Logits"))->f32(), cols == 0 ? 0 : probs.numel() / cols, cols,
      ctx.GroupRank() * cols, ctx.attrs().GetInt("ignore_index", kIgnoreIndex),
      CurrentLaunch().stream);
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

}  // namespace pw::ops::cuda
