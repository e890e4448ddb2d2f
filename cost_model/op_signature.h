#pragma once
// The identity of an op for the cost table: its type, the dtypes and shapes of its inputs
// and the attributes that change the work it does. Two ops with the same signature cost
// the same, so the profiler runs each signature once and the estimator looks it up.
//
// Attributes that matter: every attribute except floating-point ones (learning rates,
// epsilons, scales), which change values, not work, and dropout's salt and shard placement,
// which choose its mask.

#include <functional>
#include <string>
#include <vector>

#include "ir/op_def.h"
#include "ir/status.h"

namespace pw::cost {

struct OpSignature {
  std::string op_type;
  // "matmul(X:f32[32,64];Y:f32[64,192])trans_x=0,trans_y=0"
  std::string key;
  // The attribute part of the key ("trans_x=0,trans_y=0"): points of one op type with the
  // same variant interpolate best against each other.
  std::string variant;
  DataType dtype = DataType::kFloat32;  // of the first floating-point input
  double flops = 0;                     // from the op definition
  double bytes = 0;
  std::vector<TensorType> inputs;  // flattened over slots, in slot order
  bool is_communication = false;
};

using VarLookup = std::function<const Var*(const std::string&)>;

// The signature of `op` whose vars are declared where `find_var` looks. Errors name the op
// and the var that is missing or the inference that failed.
StatusOr<OpSignature> SignatureOf(const Op& op, const OpRegistry& registry,
                                  const VarLookup& find_var);

}  // namespace pw::cost
