#pragma once
// The work the executor adds to a plan beyond the programs' own ops (executor/lowering.h),
// which the profiler measures and the simulator replays: per gradient the optimizer
// reads, an accumulation `add` after the op that finishes it in each micro-batch, and
// before the optimizer a `scale` by 1/(M·dp), after a dp all-reduce when dp > 1 and the
// optimizer program has none.

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

Op GradAccumulateOp(const std::string& grad);  // grad += micro-batch grad
Op GradScaleOp(const std::string& grad, double scale);
Op DpAllReduceOp(const std::string& grad);

}  // namespace pw::cost
