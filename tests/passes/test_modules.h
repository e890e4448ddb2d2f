#pragma once
// Test-only modules built with the real op library.

#include "ir/module.h"

namespace pw::testing {

// x[2,4] · w[4,3] -> scale -> mean = loss (role loss); metadata inputs = [x].
Module TinyModule();

// A two-layer MLP whose hidden activation feeds two ops (so its gradient is accumulated):
//   h = gelu(x · w1 + b1);  y = h · w2;  r = y + h;  loss = mean(r)
Module MlpModule();

// One parameter used by two matmuls: y = (x · w) · w; loss = mean(y).
Module TiedWeightModule();

}  // namespace pw::testing
