#pragma once
// Helpers for the CUDA tests: skipping without a device, and device tensors made and read
// back without the executor (the kernel tests drive kernels directly).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "executor/cuda/device_probe.h"
#include "ops/tensor.h"

namespace pw::testing {

// Skips the test, saying why, when this machine has no usable GPU (at least `need`).
#define PW_REQUIRE_CUDA_DEVICES(need)                                                      \
  do {                                                                                     \
    auto pw_count_ = ::pw::cuda::CudaDeviceCount();                                        \
    if (!pw_count_.ok()) GTEST_SKIP() << pw_count_.status().message();                     \
    if (*pw_count_ < (need))                                                               \
      GTEST_SKIP() << "needs " << (need) << " CUDA devices, " << *pw_count_ << " visible"; \
  } while (0)

inline bool HaveCudaDevice() { return ::pw::cuda::CudaDeviceCount().ok(); }

// A device copy of a host tensor (plain cudaMalloc, freed with the last copy).
inline Tensor ToDevice(const Tensor& host) {
  void* p = nullptr;
  size_t bytes = static_cast<size_t>(host.nbytes() > 0 ? host.nbytes() : 1);
  EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0, bytes), cudaSuccess);
  if (host.nbytes() > 0)
    EXPECT_EQ(cudaMemcpy(p, host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  std::shared_ptr<std::byte> storage(static_cast<std::byte*>(p),
                                     [](std::byte* q) { (void)cudaFree(q); });
  return Tensor(host.dtype(), host.shape(), std::move(storage), Device::kCuda);
}

inline Tensor ToHost(const Tensor& device) {
  Tensor host(device.dtype(), device.shape());
  if (device.nbytes() > 0)
    EXPECT_EQ(cudaMemcpy(host.raw(), device.raw(), device.nbytes(), cudaMemcpyDeviceToHost),
              cudaSuccess);
  return host;
}

}  // namespace pw::testing
