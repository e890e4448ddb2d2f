#pragma once
// Ops whose output is their input's bytes unchanged, as a PyTorch view is: a reshape (every
// tensor is contiguous, row-major), c_identity's forward (Megatron's copy-to-tensor-parallel
// region returns its input), and an all-reduce over a group of one (Megatron at tensor
// parallelism 1 runs no kernel). The runtimes bind such an output to the input's storage
// instead of copying it, and the simulator prices them as free; the input's bytes stay
// allocated until the output's last use.

#include <set>
#include <string>

#include "ir/op.h"
#include "ir/program.h"

namespace pw {

// Vars some op of `program` writes in place (an output naming one of its own inputs): a
// view of them, or of which they are one, would see the write, so neither side aliases.
std::set<std::string> InPlaceVars(const Program& program);

// Whether `op` may be run as a view of its input: an alias op whose input and output are
// distinct vars, neither written in place (`in_place`, InPlaceVars). `group_size`: the
// members of the op's group (1 where the op runs without a communicator).
bool RunsAsView(const Op& op, int group_size, const std::set<std::string>& in_place);

}  // namespace pw
