#pragma once
// What a GPU kernel reaches, by shape: a GEMM runs in waves of output tiles, so its
// efficiency falls with wave quantization (the last wave leaves multiprocessors idle) and
// with a short reduction (each wave pays a fixed prologue); the fused attention op reaches a
// fraction of peak of its own, growing with the sequence and the head size; bandwidth-bound kernels
// reach their bandwidth only when they move enough bytes to cover their ramp-up. Used by the
// estimator's roofline when the device spec sets `multiprocessors`; the CPU and specs without it
// keep the flat roofline (DeviceSpec flops_efficiency and bandwidth_efficiency).

#include <optional>

#include "cost_model/device_spec.h"
#include "cost_model/op_signature.h"

namespace pw::cost {

// A GEMM's output rows (M), columns (N) and reduction length (K), batches folded into M.
struct GemmShape {
  double m = 0, n = 0, k = 0;
};

// The GEMM a matmul or matmul_weight_grad signature computes; nullopt for other ops.
std::optional<GemmShape> GemmShapeOf(const OpSignature& sig);

// Seconds of a GEMM of `shape` on `spec`: waves of output tiles (DeviceSpec's kernel model).
double GemmSeconds(const DeviceSpec& spec, DataType dtype, const GemmShape& shape);

// The sequence length and head size of an attention signature; nullopt for other ops.
struct AttentionShape {
  double sequence = 0, head_dim = 0;
  bool causal = true;     // only the lower triangle of the scores is computed
  bool backward = false;  // attention_grad, gqa_attention_grad
};
std::optional<AttentionShape> AttentionShapeOf(const OpSignature& sig);

// The fraction of peak the fused attention kernel reaches at `shape`, on the FLOPs it
// computes (DeviceSpec attention_efficiency, attention_half_sequence or
// attention_causal_half_sequence, attention_half_head_dim).
double AttentionEfficiency(const DeviceSpec& spec, const AttentionShape& shape);

// Seconds of an attention signature of `shape`: a causal kernel's half of the op's FLOPs at
// AttentionEfficiency, split between forward and backward by attention_backward_ratio.
double AttentionSeconds(const DeviceSpec& spec, const OpSignature& sig,
                        const AttentionShape& shape);

// Seconds of one op on a GPU spec with a kernel model (spec.multiprocessors() > 0).
double KernelTime(const DeviceSpec& spec, const OpSignature& sig);

}  // namespace pw::cost
