#include "ir/tensor_size.h"

#include <algorithm>

#include "ir/limits.h"
#include "ir/module.h"

namespace pw {

bool TensorFits(DataType dtype, const Shape& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) return false;
  int64_t bytes = std::max<int64_t>(DataTypeSize(dtype), 1);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxTensorBytes) return false;
  }
  return true;
}

std::string TensorLimitText() {
  return "at most " + std::to_string(kMaxRank) + " dimensions, each >= 0, and at most 2^50 bytes";
}

Status CheckModuleBytes(const Module& module) {
  int64_t total = 0;  // each var is at most kMaxTensorBytes: no step can overflow
  for (const Program& program : module.programs())
    for (const Var& v : program.vars()) {
      total += v.num_bytes();
      if (total > kMaxModuleBytes)
        return InvalidArgument("the module's vars add up to more than 2^52 bytes (4 PiB) at var '",
                               v.name, "' of program '", program.name(), "'");
    }
  return OkStatus();
}

}  // namespace pw
