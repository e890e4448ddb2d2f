#include "executor/backend_factory.h"

#include "executor/comm/gloo_module.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/cuda_plugin.h"
#include "ops/kernels/cpu/math_module.h"

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
  if (kind == BackendKind::kCpu) {
    // Its kernels' arithmetic and its communication: modules opened on first use.
    PW_RETURN_IF_ERROR(ops::cpu::LoadCpuMathModule());
    return LoadGlooModule().status();
  }
  PW_ASSIGN_OR_RETURN(const CudaBackendPlugin* cuda, LoadCudaBackendPlugin());
  return cuda->device_count().status();
}

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendConfig& config) {
  if (config.kind == BackendKind::kCpu) {
    PW_RETURN_IF_ERROR(ops::cpu::LoadCpuMathModule());  // its kernels' arithmetic
    cpu::CpuBackendOptions options;
    options.comm = config.comm;
    options.thread_prefix = config.thread_prefix;
    return std::unique_ptr<Backend>(std::make_unique<cpu::CpuBackend>(std::move(options)));
  }
  PW_ASSIGN_OR_RETURN(const CudaBackendPlugin* cuda, LoadCudaBackendPlugin());
  PW_ASSIGN_OR_RETURN(int devices, cuda->device_count());
  return cuda->make_backend(config.device >= 0 ? config.device : config.rank % devices,
                            config.comm);
}

StatusOr<std::unique_ptr<CommFactory>> MakeCommFactory(BackendKind kind, KvStore& store,
                                                       const Mesh& mesh, int rank,
                                                       const GlooOptions& gloo) {
  if (kind == BackendKind::kCpu) return MakeGlooCommFactory(store, mesh, rank, gloo);
  PW_ASSIGN_OR_RETURN(const CudaBackendPlugin* cuda, LoadCudaBackendPlugin());
  if (cuda->make_comm_factory == nullptr) {
    PW_RETURN_IF_ERROR(cuda->device_count().status());
    return Unimplemented(
        "this build's CUDA backend has no NCCL (not found when it was configured), so it runs "
        "one rank only");
  }
  NcclOptions nccl;
  nccl.timeout = gloo.timeout;
  return cuda->make_comm_factory(store, mesh, rank, nccl);
}

}  // namespace pw
