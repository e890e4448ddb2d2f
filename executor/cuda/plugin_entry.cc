// The entry point of libpipeweave_cuda.so (executor/cuda_plugin.h).
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/device_probe.h"
#include "executor/cuda/kernel_timer.h"
#include "executor/cuda_plugin.h"

namespace pw {
namespace {

StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device, CommFactory* comm) {
  cuda::CudaBackendOptions options;
  options.device = device;
  options.comm = comm;
  PW_ASSIGN_OR_RETURN(auto backend, cuda::CudaBackend::Create(options));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace
}  // namespace pw

extern "C" const pw::CudaBackendPlugin* pw_cuda_backend_plugin() {
  static const pw::CudaBackendPlugin plugin = {
    .device_count = &pw::cuda::CudaDeviceCount,
    .make_backend = &pw::MakeCudaBackend,
#if PW_HAVE_NCCL
    .make_comm_factory = &pw::MakeNcclCommFactory,
#else
    .make_comm_factory = nullptr,
#endif
    .has_kernel = &pw::cuda::HasKernel,
    .time_kernel = &pw::cuda::TimeKernel,
    .device_info = &pw::cuda::DeviceInfo,
  };
  return &plugin;
}
