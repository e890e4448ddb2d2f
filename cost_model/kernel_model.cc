#include "cost_model/kernel_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace pw::cost {
namespace {

double DtypeFractionOf(
    const google::protobuf::RepeatedPtrField<pipeweave::proto::DtypeFraction>& fractions,
    DataType dtype, double fallback) {
  const char* name = DataTypeName(dtype);
  for (const auto& f : fractions)
    if (f.dtype() == name) return f.fraction();
  for (const auto& f : fractions)
    if (f.dtype() == "f32") return f.fraction();
  return fallback;
}

bool IsAttention(const std::string& type) {
  return type == "attention" || type == "attention_grad" || type == "gqa_attention" ||
         type == "gqa_attention_grad";
}

}  // namespace

std::optional<AttentionShape> AttentionShapeOf(const OpSignature& sig) {
  if (!IsAttention(sig.op_type) || sig.inputs.empty()) return std::nullopt;
  const size_t at = sig.variant.find("num_heads=");
  if (at == std::string::npos) return std::nullopt;
  const double heads = std::atof(sig.variant.c_str() + at + 10);
  const Shape& x = sig.inputs[0].shape;  // QKV [B, S, 3 h d] or Q [B, S, h d]
  if (heads <= 0 || x.size() != 3) return std::nullopt;
  const double packed = sig.op_type.rfind("gqa_", 0) == 0 ? 1 : 3;
  AttentionShape a{static_cast<double>(x[1]), static_cast<double>(x[2]) / (packed * heads)};
  if (!(a.sequence > 0 && a.head_dim > 0)) return std::nullopt;
  // The attention ops are causal unless the attribute says otherwise.
  a.causal = sig.variant.find("causal=0") == std::string::npos;
  a.backward =
      sig.op_type.size() > 5 && sig.op_type.compare(sig.op_type.size() - 5, 5, "_grad") == 0;
  return a;
}

double AttentionEfficiency(const DeviceSpec& spec, const AttentionShape& a) {
  double e = spec.attention_efficiency();
  const double half_sequence = a.causal && spec.attention_causal_half_sequence() > 0
                                   ? spec.attention_causal_half_sequence()
                                   : spec.attention_half_sequence();
  if (half_sequence > 0) e *= a.sequence / (a.sequence + half_sequence);
  if (const double h = spec.attention_half_head_dim(); h > 0)
    e *= (a.head_dim / (a.head_dim + h)) / (128 / (128 + h));
  return std::min(1.0, e);
}

double AttentionSeconds(const DeviceSpec& spec, const OpSignature& sig, const AttentionShape& a) {
  // The op's FLOPs count every score; a causal kernel skips the upper triangle's blocks.
  const double work = sig.flops * (a.causal ? 0.5 : 1.0);
  double seconds = work / (PeakFlops(spec, sig.dtype) * AttentionEfficiency(spec, a));
  // Forward and backward are priced by FLOPs (1 : 2); a flash backward, which recomputes the
  // scores, takes a larger share of their sum.
  if (const double r = spec.attention_backward_ratio(); r > 0)
    seconds *= a.backward ? 3 * r / (2 * (1 + r)) : 3 / (1 + r);
  return seconds;
}

std::optional<GemmShape> GemmShapeOf(const OpSignature& sig) {
  const bool trans_x = sig.variant.find("trans_x=1") != std::string::npos;
  const bool trans_y = sig.variant.find("trans_y=1") != std::string::npos;
  if (sig.inputs.size() < 2 || sig.flops <= 0) return std::nullopt;
  const Shape& x = sig.inputs[0].shape;
  const Shape& y = sig.inputs[1].shape;
  if (x.size() < 2 || y.size() < 2) return std::nullopt;
  GemmShape g;
  if (sig.op_type == "matmul") {
    // Y [..., K, N] (trans_y: [..., N, K]); M takes every row of every batch.
    g.k = static_cast<double>(trans_y ? y.back() : y[y.size() - 2]);
    g.n = static_cast<double>(trans_y ? y[y.size() - 2] : y.back());
    g.m = sig.flops / (2 * g.n * g.k);
  } else if (sig.op_type == "matmul_weight_grad") {
    // dY [K_in, N_out] = X^T [K_in, rows] . dOut [rows, N_out]: the rows are the reduction.
    g.m = static_cast<double>(trans_x ? x[x.size() - 2] : x.back());
    g.n = static_cast<double>(y.back());
    g.k = sig.flops / (2 * g.m * g.n);
  } else {
    return std::nullopt;
  }
  if (!(g.m > 0 && g.n > 0 && g.k > 0)) return std::nullopt;
  return g;
}

double GemmSeconds(const DeviceSpec& spec, DataType dtype, const GemmShape& g) {
  const double base = DtypeFractionOf(spec.gemm_efficiency(), dtype,
                                      spec.flops_efficiency() > 0 ? spec.flops_efficiency() : 1);
  const double peak = PeakFlops(spec, dtype);
  const double flops = 2 * g.m * g.n * g.k;
  if (spec.multiprocessors() <= 0 || spec.gemm_tile_m() <= 0 || spec.gemm_tile_n() <= 0)
    return flops / (peak * base);
  // A smaller output gets a kernel with smaller tiles (to a multiple of 16).
  auto clip = [](double tile, double extent) {
    return std::min(tile, std::max(16.0, 16 * std::ceil(extent / 16)));
  };
  const double tm = clip(spec.gemm_tile_m(), g.m), tn = clip(spec.gemm_tile_n(), g.n);
  const double tiles = std::ceil(g.m / tm) * std::ceil(g.n / tn);
  const double waves = std::ceil(tiles / spec.multiprocessors());
  const double per_multiprocessor = peak / spec.multiprocessors() * base;
  return waves * (2 * tm * tn * g.k / per_multiprocessor + spec.gemm_wave_overhead());
}

double KernelTime(const DeviceSpec& spec, const OpSignature& sig) {
  const double peak = PeakFlops(spec, sig.dtype);
  const double bw_eff = spec.bandwidth_efficiency() > 0 ? spec.bandwidth_efficiency() : 1;
  const double ramp = sig.bytes / (sig.bytes + std::max(0.0, spec.bandwidth_half_bytes()));
  const double memory = spec.memory_bandwidth() > 0 && sig.bytes > 0
                            ? sig.bytes / (spec.memory_bandwidth() * bw_eff * ramp)
                            : 0;
  double compute = 0;
  if (peak > 0 && sig.flops > 0) {
    double efficiency = spec.flops_efficiency() > 0 ? spec.flops_efficiency() : 1;
    if (IsAttention(sig.op_type) && spec.attention_efficiency() > 0)
      efficiency = spec.attention_efficiency();
    compute = sig.flops / (peak * efficiency);
    if (std::optional<GemmShape> g = GemmShapeOf(sig)) compute = GemmSeconds(spec, sig.dtype, *g);
    if (std::optional<AttentionShape> a = AttentionShapeOf(sig);
        a && spec.attention_efficiency() > 0)
      compute = AttentionSeconds(spec, sig, *a);
  }
  return std::max(spec.min_kernel_time(), std::max(compute, memory));
}

}  // namespace pw::cost
