#include "ir/tensor_size.h"

#include <algorithm>

#include "ir/limits.h"

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

}  // namespace pw
