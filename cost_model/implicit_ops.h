#pragma once
// Which gradients the executor's own work (ir/rank_sequence.h: accumulation after the op
// that finishes a micro-batch's gradient, scaling before the optimizer) touches, for the
// profiler to measure that work on a module with or without a plan.

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/var.h"

namespace pw::cost {

// Gradients: vars the optimizer ops read that the other ops write, except persistable
// ones. `is_persistable` looks the var up.
std::set<std::string> OptimizerGradients(
    const std::vector<const Op*>& optimizer_ops, const std::vector<const Op*>& other_ops,
    const std::function<bool(const std::string&)>& is_persistable);

}  // namespace pw::cost
