#pragma once
// The profiler's view of a GPU: op kernels timed through the CUDA backend library, and
// the device's built-in spec chosen from the name the driver reports (H100 -> h100).

#include "cost_model/profiler.h"

namespace pw::tools {

// Fails with one line ("no CUDA device: ...", "this build has no CUDA backend ...") when
// GPU `gpu` cannot be used.
StatusOr<cost::KernelTimer> CudaKernelTimer(int gpu);

// The built-in device spec name for a driver's device name ("NVIDIA H100 80GB HBM3" ->
// "h100"), or empty when none matches.
std::string BuiltinSpecForGpu(const std::string& driver_name);

}  // namespace pw::tools
