#include "executor/backend_factory.h"

#include "executor/cpu/cpu_backend.h"

#if PW_HAVE_CUDA
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/device_probe.h"
#endif
#if PW_HAVE_NCCL
#include "executor/comm/nccl_comm.h"
#endif

namespace pw {

StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return InvalidArgument("unknown backend '", name, "' (cpu, cuda)");
}

const char* BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

Status CheckBackendAvailable(BackendKind kind) {
  if (kind == BackendKind::kCpu) return OkStatus();
#if PW_HAVE_CUDA
  return cuda::CudaDeviceCount().status();
#else
  return Unimplemented(
      "this build has no CUDA backend (no CUDA toolkit was found when it was configured)");
#endif
}

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendConfig& config) {
  if (config.kind == BackendKind::kCpu) {
    cpu::CpuBackendOptions options;
    options.comm = config.comm;
    options.thread_prefix = config.thread_prefix;
    return std::unique_ptr<Backend>(std::make_unique<cpu::CpuBackend>(std::move(options)));
  }
#if PW_HAVE_CUDA
  PW_ASSIGN_OR_RETURN(int devices, cuda::CudaDeviceCount());
  cuda::CudaBackendOptions options;
  options.device = config.device >= 0 ? config.device : config.rank % devices;
  options.comm = config.comm;
  PW_ASSIGN_OR_RETURN(auto backend, cuda::CudaBackend::Create(options));
  return std::unique_ptr<Backend>(std::move(backend));
#else
  PW_RETURN_IF_ERROR(CheckBackendAvailable(config.kind));
  return Internal("unreachable");
#endif
}

StatusOr<std::unique_ptr<CommFactory>> MakeCommFactory(BackendKind kind, KvStore& store,
                                                       const Mesh& mesh, int rank,
                                                       const GlooOptions& gloo) {
  if (kind == BackendKind::kCpu) return MakeGlooCommFactory(store, mesh, rank, gloo);
#if PW_HAVE_NCCL
  NcclOptions nccl;
  nccl.timeout = gloo.timeout;
  return MakeNcclCommFactory(store, mesh, rank, nccl);
#else
  PW_RETURN_IF_ERROR(CheckBackendAvailable(kind));
  return Unimplemented(
      "this build's CUDA backend has no NCCL (not found when it was configured), so it runs "
      "one rank only");
#endif
}

}  // namespace pw
