#pragma once
// Checks that a program is well formed. Every error names the program, the op index,
// the op type and the var or slot involved, e.g.
//   program 'main', op 12 (matmul): input 'w' is used before it is defined
// Checks: unknown op type; slot or attribute not in the op's definition (and missing
// required ones, wrong attribute type); use of an undeclared var; use before definition;
// output shape or dtype that disagrees with shape inference; dependency cycles.

#include <cstddef>
#include <optional>

#include "ir/module.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pw {

Status VerifyProgram(const Program& program, const OpRegistry& registry);
// Every program of the module, the mesh, and the plan's references to programs.
Status VerifyModule(const Module& module, const OpRegistry& registry);

// Whether ops after the c_split{view} at `index` use it as the distributed optimizer does:
// the slice of a parameter updated in place, then all-gathered back into the parameter over
// the same group, with no other op touching the parameter after the split. Writing the
// slice then writes the parameter's own rows, which the all-gather would put there anyway:
// the same values as without the view, so the verifier allows it. Returns the index of that
// all-gather, or nothing.
std::optional<size_t> InPlaceShardGather(const Program& program, size_t index);

}  // namespace pw
