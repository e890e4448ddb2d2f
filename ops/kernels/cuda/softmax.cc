// softmax, softmax_grad and the fused softmax + cross-entropy loss (host side). Labels
// are checked on the device; a bad one fails the step when the stream is synchronized.

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

int64_t Rows(const Tensor& x) {
  int64_t n = x.dim(-1);
  return n == 0 ? 0 : x.numel() / n;
}

Status Softmax(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  bool causal = ctx.attrs().GetBool("causal");
  LaunchSoftmax(x.f32(), ctx.Out("Out")->f32(), Rows(x), x.dim(-1), causal ? x.dim(-2) : 0,
                CurrentLaunch().stream);
  return OkStatus();
}

Status SoftmaxGrad(KernelContext& ctx) {
  const Tensor& y = *ctx.In("Out");
  LaunchSoftmaxGrad(y.f32(), ctx.In(GradVarName("Out"))->f32(), ctx.Out(GradVarName("X"))->f32(),
                    Rows(y), y.dim(-1), CurrentLaunch().stream);
  return OkStatus();
}

Status SoftmaxCrossEntropy(KernelContext& ctx) {
  const Tensor& logits = *ctx.In("Logits");
  int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  const LaunchContext& launch = CurrentLaunch();
  LaunchSoftmaxCrossEntropy(logits.f32(), ctx.In("Label")->i64(), ctx.Out("Loss")->f32(),
                            ctx.Out("Softmax")->f32(), Rows(logits), logits.dim(-1), ignore,
                            launch.error, launch.site, launch.stream);
  return OkStatus();
}

Status SoftmaxCrossEntropyGrad(KernelContext& ctx) {
  const Tensor& probs = *ctx.In("Softmax");
  int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  const LaunchContext& launch = CurrentLaunch();
  LaunchSoftmaxCrossEntropyGrad(probs.f32(), ctx.In("Label")->i64(),
                                ctx.In(GradVarName("Loss"))->f32(),
                                ctx.Out(GradVarName("Logits"))->f32(), Rows(probs), probs.dim(-1),
                                ignore, launch.error, launch.site, launch.stream);
  return OkStatus();
}

}  // namespace

void RegisterSoftmaxKernels(KernelTable& table) {
  Add<Softmax>(table, "softmax");
  Add<SoftmaxGrad>(table, "softmax_grad");
  Add<SoftmaxCrossEntropy>(table, "softmax_cross_entropy");
  Add<SoftmaxCrossEntropyGrad>(table, "softmax_cross_entropy_grad");
}

}  // namespace pw::ops::cuda
