#pragma once
// Where a CUDA kernel launches. A CUDA kernel has the CPU kernel's signature
// (Status(KernelContext&)), so the stream it runs on, that stream's cuBLAS handle, the pool
// its temporaries come from and the record its device-side checks report into reach it
// through this per-thread context, which the executor sets around each call.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace pw::ops::cuda {

struct DeviceError;

struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;  // already bound to `stream` is not assumed
  cudaMemPool_t pool = nullptr;   // temporaries; null: the device's current pool
  DeviceError* error = nullptr;   // device memory, one record per stream
  int site = 0;                   // stored with a device error: which launch reported it
};

// The calling thread's context; all fields null when none is set.
const LaunchContext& CurrentLaunch();

// Sets the calling thread's context until it goes out of scope.
class ScopedLaunch {
 public:
  explicit ScopedLaunch(const LaunchContext& context);
  ~ScopedLaunch();
  ScopedLaunch(const ScopedLaunch&) = delete;
  ScopedLaunch& operator=(const ScopedLaunch&) = delete;

 private:
  LaunchContext saved_;
};

}  // namespace pw::ops::cuda
