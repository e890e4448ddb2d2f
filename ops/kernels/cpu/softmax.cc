// softmax, softmax_grad and the fused softmax + cross-entropy loss. Row reductions
// accumulate in double (vector_math.h); rows split among the kernel threads without
// changing a bit.

#include <algorithm>
#include <cmath>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

// causal: row i of the last two dims keeps columns j <= i.
Status Softmax(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  bool causal = ctx.attrs().GetBool("causal");
  int64_t n = x.dim(-1);
  int64_t rows = n == 0 ? 0 : x.numel() / n;
  int64_t period = causal ? x.dim(-2) : 1;
  ParallelFor(rows, RowGrain(n, kCostlyGrain), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t valid = causal ? std::min(n, r % period + 1) : n;
      SoftmaxRowF32(x.f32() + r * n, out.f32() + r * n, n, valid, nullptr);
    }
  });
  return OkStatus();
}

Status SoftmaxGrad(KernelContext& ctx) {
  const Tensor& y = *ctx.In("Out");
  const float* dy = ctx.In(GradVarName("Out"))->f32();
  Tensor& dx = *ctx.Out(GradVarName("X"));
  int64_t n = y.dim(-1);
  int64_t rows = n == 0 ? 0 : y.numel() / n;
  ParallelFor(rows, RowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* yr = y.f32() + r * n;
      const float* dyr = dy + r * n;
      const float dot = static_cast<float>(DotF32(dyr, yr, n));
      MulDifferenceF32(yr, dyr, dot, dx.f32() + r * n, n);
    }
  });
  return OkStatus();
}

Status CheckLabel(std::string_view op, int64_t i, int64_t label, int64_t classes, int64_t ignore) {
  if (label != ignore && (label < 0 || label >= classes)) {
    return InvalidArgument(op, ": Label[", i, "] = ", label, " is out of range [0, ", classes,
                           ") and is not ignore_index ", ignore);
  }
  return OkStatus();
}

Status SoftmaxCrossEntropy(KernelContext& ctx) {
  const Tensor& logits = *ctx.In("Logits");
  const int64_t* label = ctx.In("Label")->i64();
  float* loss = ctx.Out("Loss")->f32();
  float* probs = ctx.Out("Softmax")->f32();
  int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  int64_t v = logits.dim(-1);
  int64_t rows = v == 0 ? 0 : logits.numel() / v;
  for (int64_t r = 0; r < rows; ++r) {
    PW_RETURN_IF_ERROR(CheckLabel("softmax_cross_entropy", r, label[r], v, ignore));
  }
  ParallelFor(rows, RowGrain(v, kCostlyGrain), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = logits.f32() + r * v;
      double log_sum;
      const float mx = SoftmaxRowF32(x, probs + r * v, v, v, &log_sum);
      loss[r] = label[r] == ignore ? 0.f : static_cast<float>(log_sum - (x[label[r]] - mx));
    }
  });
  return OkStatus();
}

Status SoftmaxCrossEntropyGrad(KernelContext& ctx) {
  const Tensor& probs = *ctx.In("Softmax");
  const int64_t* label = ctx.In("Label")->i64();
  const float* dloss = ctx.In(GradVarName("Loss"))->f32();
  float* dlogits = ctx.Out(GradVarName("Logits"))->f32();
  int64_t ignore = ctx.attrs().GetInt("ignore_index", kIgnoreIndex);
  int64_t v = probs.dim(-1);
  int64_t rows = v == 0 ? 0 : probs.numel() / v;
  for (int64_t r = 0; r < rows; ++r) {
    PW_RETURN_IF_ERROR(CheckLabel("softmax_cross_entropy_grad", r, label[r], v, ignore));
  }
  ParallelFor(rows, RowGrain(v), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      CrossEntropyGradRow(probs.f32() + r * v, v, label[r] == ignore, dloss[r], label[r],
                          dlogits + r * v);
  });
  return OkStatus();
}

}  // namespace

void CrossEntropyGradRow(const float* p, int64_t n, bool ignored, float dloss, int64_t target,
                         float* dx) {
  if (ignored) {
    std::fill_n(dx, n, 0.f);
    return;
  }
  MulScalarF32(p, dloss, dx, n);
  if (target >= 0 && target < n) dx[target] -= dloss;
}

void RegisterSoftmaxKernels(KernelTable& table) {
  Add<Softmax>(table, "softmax");
  Add<SoftmaxGrad>(table, "softmax_grad");
  Add<SoftmaxCrossEntropy>(table, "softmax_cross_entropy");
  Add<SoftmaxCrossEntropyGrad>(table, "softmax_cross_entropy_grad");
}

}  // namespace pw::ops::cpu
