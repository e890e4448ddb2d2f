#include "tools/cuda_kernel_timer.h"

#include "executor/cuda_plugin.h"

namespace pw::tools {

std::string BuiltinSpecForGpu(const std::string& driver_name) {
  for (const char* known : {"H100", "H200", "A100"})
    if (driver_name.find(known) != std::string::npos) {
      std::string name = known;
      name[0] = static_cast<char>(name[0] - 'A' + 'a');
      return name;
    }
  return "";
}

StatusOr<cost::KernelTimer> CudaKernelTimer(int gpu) {
  PW_ASSIGN_OR_RETURN(const CudaBackendPlugin* cuda, LoadCudaBackendPlugin());
  PW_ASSIGN_OR_RETURN(int count, cuda->device_count());
  if (gpu >= count)
    return InvalidArgument("--gpu ", gpu, ": this machine has ", count, " CUDA device",
                           count == 1 ? "" : "s", " (0..", count - 1, ")");
  PW_ASSIGN_OR_RETURN(cuda::CudaDeviceInfo info, cuda->device_info(gpu));
  const std::string builtin = BuiltinSpecForGpu(info.name);
  if (builtin.empty())
    return InvalidArgument("GPU ", gpu, " is a '", info.name,
                           "', which has no built-in device spec (built-in: h100, h200, a100); its "
                           "costs would not match any device `sim --device` prices");
  cost::KernelTimer timer;
  PW_ASSIGN_OR_RETURN(timer.spec, cost::BuiltinDeviceSpec(builtin));
  timer.has_kernel = [cuda](const std::string& type) { return cuda->has_kernel(type); };
  timer.time = [cuda, gpu](const cost::CostedOp& op, int warmup, int repeats, double min_seconds) {
    cuda::KernelTiming timing;
    timing.op = &op.op;
    timing.vars = &op.vars;
    timing.label = op.sig.key;
    timing.warmup = warmup;
    timing.repeats = repeats;
    timing.min_seconds = min_seconds;
    return cuda->time_kernel(gpu, timing);
  };
  return timer;
}

}  // namespace pw::tools
