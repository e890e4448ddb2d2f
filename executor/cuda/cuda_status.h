#pragma once
// CUDA runtime results as Status: `what` failed with the runtime's own message.

#include <cuda_runtime_api.h>

#include <string_view>

#include "ir/status.h"

namespace pw::cuda {

inline Status CudaStatus(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return OkStatus();
  if (e == cudaErrorMemoryAllocation) return FailedPrecondition(what, ": out of device memory");
  return Internal(what, ": ", cudaGetErrorString(e));
}

}  // namespace pw::cuda
