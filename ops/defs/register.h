#pragma once
// Internal: every op family registers its definitions from its own file.

#include "ir/op_def.h"

namespace pw::ops {

void RegisterMatmulOps(OpRegistry& registry);
void RegisterEmbeddingOps(OpRegistry& registry);
void RegisterElementwiseOps(OpRegistry& registry);
void RegisterNormOps(OpRegistry& registry);
void RegisterRmsNormOps(OpRegistry& registry);
void RegisterSwigluOps(OpRegistry& registry);
void RegisterRotaryOps(OpRegistry& registry);
void RegisterAttentionOps(OpRegistry& registry);
void RegisterGqaAttentionOps(OpRegistry& registry);
void RegisterSoftmaxOps(OpRegistry& registry);
void RegisterMeanOps(OpRegistry& registry);
void RegisterFillOps(OpRegistry& registry);
void RegisterLayoutOps(OpRegistry& registry);
void RegisterCollectiveOps(OpRegistry& registry);
void RegisterOptimizerOps(OpRegistry& registry);
void RegisterCastOps(OpRegistry& registry);
void RegisterVocabParallelOps(OpRegistry& registry);
void RegisterLossScalingOps(OpRegistry& registry);
void RegisterDropoutOps(OpRegistry& registry);
void RegisterBiasFusionOps(OpRegistry& registry);

}  // namespace pw::ops
