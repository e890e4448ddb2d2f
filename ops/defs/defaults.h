#pragma once
// Internal: attribute defaults that both an OpDef and its kernels need, kept in one place
// so the two cannot drift apart.

#include <cstdint>

namespace pw::ops {

inline constexpr double kLayerNormEpsilon = 1e-5;
inline constexpr double kRmsNormEpsilon = 1e-5;
inline constexpr double kRopeTheta = 10000.0;  // rotary_embedding: the RoPE paper's base
inline constexpr bool kAttentionCausal = true;
inline constexpr int64_t kIgnoreIndex = -100;  // softmax_cross_entropy: label to skip
inline constexpr double kAdamLr = 1e-3;
inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.999;
inline constexpr double kAdamEpsilon = 1e-8;
inline constexpr const char* kDefaultGroup = "mp";

}  // namespace pw::ops
