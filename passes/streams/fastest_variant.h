#pragma once
// Choosing among variants of a module by the simulator: the passes whose option is `auto`
// (overlap-grad-reduce's bucket size, overlap-param-gather's placement) price each variant
// on a copy and keep the fastest.

#include <cstddef>
#include <functional>

#include "ir/module.h"
#include "ir/status.h"
#include "simulator/simulator.h"

namespace pw {

// Simulates `count` copies of `module`, the i-th changed by `make(copy, i)`, and returns the
// index of the shortest step; of step times within a relative 1e-9 of each other, the first.
StatusOr<size_t> FastestVariant(const Module& module, const cost::Simulator& simulator,
                                size_t count, const std::function<void(Module&, size_t)>& make);

}  // namespace pw
