#pragma once
// Test-only: checks an op's grad maker and grad kernels against central finite
// differences of L = sum over outputs of sum(Out ⊙ R), R fixed and random.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ops/tensor.h"

namespace pw::testing {

struct GradCheck {
  Op op;
  std::map<std::string, Tensor> inputs;
  std::set<std::string> params;   // vars marked is_parameter (weight grads)
  std::set<std::string> no_grad;  // f32 inputs whose gradient is not wanted
  // Output vars that enter the loss; empty means every output slot "Out"/"Y"/"Loss".
  std::vector<std::string> loss_outputs;
  float h = 1e-2f;
  double rtol = 1e-2;
  double atol = 2e-3;
  int max_elements = 96;  // per input: check at most this many (spread) elements
};

struct GradCheckResult {
  std::vector<Op> grad_ops;
  std::vector<std::pair<std::string, std::string>> aliases;
};

// Runs the check with gtest assertions; returns what the grad maker emitted.
GradCheckResult CheckGradients(const GradCheck& check);

}  // namespace pw::testing
