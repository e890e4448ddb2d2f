#pragma once
// A named, typed, shaped value of a program.

#include <cstdint>
#include <string>

#include "ir/types.h"

namespace pw {

// How a parameter or piece of optimizer state gets its values when a program runs.
// Values are a pure function of (seed, key, index in the full tensor), so a var that is a
// model-parallel shard holds exactly its slice of the unsharded tensor.
struct Initializer {
  enum class Kind { kNone = 0, kZeros, kConstant, kNormal, kUniform };
  Kind kind = Kind::kNone;
  double value = 0;  // kConstant
  double mean = 0;   // kNormal
  double std = 0;    // kNormal
  double low = 0;    // kUniform
  double high = 0;   // kUniform
  uint64_t seed = 0;
  std::string key;  // identity of the full tensor; empty means the var's name
  // The unsharded tensor this var is a slice of; empty when the var is not sharded.
  Shape full_shape;
  int shard_axis = 0;
  int shard_index = 0;
  int num_shards = 1;

  bool operator==(const Initializer&) const = default;
};

struct Var {
  std::string name;
  DataType dtype = DataType::kFloat32;
  Shape shape;
  bool persistable = false;   // lives across steps: parameters, optimizer state
  bool is_parameter = false;  // trained by the optimizer
  Initializer init;
  int stage = -1;  // pipeline stage of the defining op, -1 when not placed

  int64_t num_elements() const { return NumElements(shape); }
  int64_t num_bytes() const { return num_elements() * DataTypeSize(dtype); }
  bool operator==(const Var&) const = default;
};

// The name of the gradient var of `name`: "x" -> "x@GRAD".
std::string GradVarName(const std::string& name);
// True for names produced by GradVarName.
bool IsGradVarName(const std::string& name);
// "x@GRAD" -> "x"; any other name unchanged.
std::string ForwardVarName(const std::string& grad_name);

}  // namespace pw
