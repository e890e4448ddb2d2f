#include "ir/types.h"

#include <sstream>

namespace pw {

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "f32";
    case DataType::kInt64:
      return "i64";
    case DataType::kInt32:
      return "i32";
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kInvalid:
      break;
  }
  return "invalid";
}

bool ParseDataType(const std::string& name, DataType* dtype) {
  for (DataType d : {DataType::kFloat32, DataType::kInt64, DataType::kInt32, DataType::kFloat16,
                     DataType::kBFloat16}) {
    if (name == DataTypeName(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

int64_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kInt32:
      return 4;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInvalid:
      break;
  }
  return 0;
}

bool IsFloatingType(DataType dtype) { return dtype == DataType::kFloat32 || IsLowPrecision(dtype); }

bool IsLowPrecision(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

}  // namespace pw
