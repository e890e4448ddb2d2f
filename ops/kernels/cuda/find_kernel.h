#pragma once
// The CUDA kernel of an op type (built when the CUDA toolkit is found). Same signature
// and contract as the CPU kernel, over device tensors, on CurrentLaunch().stream
// (kernels/cuda/launch.h).

#include <string_view>

#include "ops/kernel.h"

namespace pw {

// nullptr when the op type has no CUDA kernel.
CpuKernel FindCudaKernel(std::string_view type);

}  // namespace pw
