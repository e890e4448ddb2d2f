#pragma once
// One small instance of every op with a CPU kernel (several for ops with variants: the
// transposes and batching of matmul, causal masks, in-place outputs, many summands), with
// random inputs, for comparing the CUDA kernels with the CPU ones. And inputs the kernels
// must refuse (ids and labels out of range, bad Adam state).

#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ops/tensor.h"

namespace pw::testing {

struct KernelCase {
  std::string name;  // unique, a valid test name
  Op op;
  std::map<std::string, Tensor> inputs;  // by var name
  double tolerance = 1e-5;               // max |cuda - cpu| / max(1, max |cpu|)
};

// gtest prints a failing case by its name.
inline void PrintTo(const KernelCase& c, std::ostream* out) { *out << c.name; }

std::vector<KernelCase> KernelCases();
// Inputs the CPU kernel refuses with an error (its message is what the device reports).
std::vector<KernelCase> BadInputCases();

}  // namespace pw::testing
