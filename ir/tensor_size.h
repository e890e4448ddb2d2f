#pragma once
// Whether a tensor's declared type fits the limits of ir/limits.h: dimensions >= 0, at
// most kMaxRank of them, at most kMaxTensorBytes, with no product overflowing on the way.
// The loader and the verifier refuse what does not fit, before anything is allocated.

#include <string>

#include "ir/status.h"
#include "ir/types.h"

namespace pw {

bool TensorFits(DataType dtype, const Shape& shape);
std::string TensorLimitText();  // the limits, for messages

class Module;
// The bytes of every var each program of `module` declares add up to at most
// kMaxModuleBytes (each var must fit already). The error names the limit.
Status CheckModuleBytes(const Module& module);

}  // namespace pw
