#pragma once
// The CUDA backend (cudart, cuBLAS, NCCL and the CUDA kernels) is a shared library of its
// own, libpipeweave_cuda.so, opened the first time a run asks for `--backend cuda`: loading
// those libraries costs tens of milliseconds, which commands that never touch a GPU should
// not pay. The library resolves pipeweave's own symbols against the program that opens it,
// so that program must export them (cmake: pw_host_cuda_backend).

#include <memory>

#include "executor/backend.h"
#include "executor/comm/kv_store.h"
#include "executor/comm/nccl_comm.h"
#include "executor/comm/stream_comm.h"
#include "executor/cuda/kernel_timer.h"
#include "ir/rank_layout.h"

namespace pw {

// What the library hands out: plain function pointers, one table per process.
struct CudaBackendPlugin {
  // The number of visible devices, or "no CUDA device: ...".
  StatusOr<int> (*device_count)();
  // A backend on `device`, communicating through `comm` (may be null: one rank).
  StatusOr<std::unique_ptr<Backend>> (*make_backend)(int device, CommFactory* comm);
  // NCCL communicators between ranks; null when the library was built without NCCL.
  StatusOr<std::unique_ptr<CommFactory>> (*make_comm_factory)(KvStore& store, const Mesh& mesh,
                                                              int rank, NcclOptions options);
  // The device time of one op's kernel run alone, and the device's name and memory
  // (`pipeweave profile --backend cuda`).
  bool (*has_kernel)(const std::string& op_type);
  StatusOr<std::vector<double>> (*time_kernel)(int device, const cuda::KernelTiming& timing);
  StatusOr<cuda::CudaDeviceInfo> (*device_info)(int device);
};

// Opens the library once (later calls return the same table) or says why it cannot:
// this build has no CUDA backend, or the library is missing or fails to load.
StatusOr<const CudaBackendPlugin*> LoadCudaBackendPlugin();

}  // namespace pw

// The one symbol the library exports for the loader.
extern "C" const pw::CudaBackendPlugin* pw_cuda_backend_plugin();
