#pragma once
// The registry of every built-in op definition.

#include "ir/op_def.h"

namespace pw::ops {

// All built-in op definitions; built on first use.
const OpRegistry& Registry();

}  // namespace pw::ops
