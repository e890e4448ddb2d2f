#pragma once
// Times one op's CUDA kernel alone, for `pipeweave profile --backend cuda`: inputs with
// synthetic values on the device, outputs allocated (and zero-filled) from a stream-ordered
// pool before every run as the backend allocates them, and each run's device time between
// two CUDA events around the allocation and the kernel.

#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/status.h"
#include "ir/var.h"

namespace pw::cuda {

struct KernelTiming {
  const Op* op = nullptr;
  const std::vector<Var>* vars = nullptr;  // every var the op reads or writes
  std::string label;                       // names the op in errors
  int warmup = 3;
  int repeats = 20;
  double min_seconds = 0.02;  // more runs (up to 50 times `repeats`) until this much was timed
};

// Whether `op_type` has a CUDA kernel.
bool HasKernel(const std::string& op_type);

// The per-run seconds of the timed runs on `device`; NotFound without a CUDA kernel.
StatusOr<std::vector<double>> TimeKernel(int device, const KernelTiming& timing);

// The device's name as the driver reports it ("NVIDIA H100 80GB HBM3") and its memory.
struct CudaDeviceInfo {
  std::string name;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
};
StatusOr<CudaDeviceInfo> DeviceInfo(int device);

}  // namespace pw::cuda
