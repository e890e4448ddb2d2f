#pragma once
// Checks that a program is well formed. Every error names the program, the op index,
// the op type and the var or slot involved, e.g.
//   program 'main', op 12 (matmul): input 'w' is used before it is defined
// Checks: unknown op type; slot or attribute not in the op's definition (and missing
// required ones, wrong attribute type); use of an undeclared var; use before definition;
// output shape or dtype that disagrees with shape inference; dependency cycles.

#include "ir/module.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pw {

Status VerifyProgram(const Program& program, const OpRegistry& registry);
// Every program of the module, the mesh, and the plan's references to programs.
Status VerifyModule(const Module& module, const OpRegistry& registry);

}  // namespace pw
