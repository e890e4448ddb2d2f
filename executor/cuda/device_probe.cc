#include "executor/cuda/device_probe.h"

#include <cuda_runtime_api.h>

#include "executor/cuda/cuda_status.h"

namespace pw::cuda {

StatusOr<int> CudaDeviceCount() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // The failed query leaves a sticky last error; clear it so later checks see their own.
    (void)cudaGetLastError();
    return FailedPrecondition("no CUDA device: ", cudaGetErrorString(e));
  }
  if (count < 1) return FailedPrecondition("no CUDA device: the driver reports none");
  return count;
}

Status UseDevice(int device) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return OkStatus();
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace pw::cuda
