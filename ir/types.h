#pragma once
// Element types and shapes of vars.

#include <cstdint>
#include <string>
#include <vector>

namespace pw {

enum class DataType { kInvalid = 0, kFloat32, kInt64, kInt32, kFloat16, kBFloat16 };

using Shape = std::vector<int64_t>;

const char* DataTypeName(DataType dtype);  // "f32", "i64", ...
bool ParseDataType(const std::string& name, DataType* dtype);
int64_t DataTypeSize(DataType dtype);  // bytes per element
// f32, f16 and bf16.
bool IsFloatingType(DataType dtype);
// f16 and bf16: stored in 16 bits, computed in f32 by the kernels.
bool IsLowPrecision(DataType dtype);

int64_t NumElements(const Shape& shape);        // 1 for a scalar (empty shape)
std::string ShapeToString(const Shape& shape);  // "[2, 16, 64]"

}  // namespace pw
