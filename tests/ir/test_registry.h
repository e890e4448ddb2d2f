#pragma once
// A tiny op registry for ir/ tests, independent of the real op library:
//   ew(X, Y) -> Out        elementwise, same shapes, attr "alpha" (float, default 1)
//   unary(X) -> Out        same shape
//   gen() -> Out           attrs shape (ints, required)
//   update(P, G) -> POut   in place
#include "ir/op_def.h"

namespace pw::testing {
const OpRegistry& TestRegistry();
}
