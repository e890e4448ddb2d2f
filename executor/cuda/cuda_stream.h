#pragma once
// One CUDA stream. Enqueue runs on the host thread and only queues: the copy-stream
// fence, cudaStreamWaitEvent for the instruction's waits, output allocation and the
// kernel launch (or a transfer, or a scalar copy for a fetch), cudaEventRecord for its
// records, then the release of its slots (their memory is freed in stream order).
// Synchronize waits for the stream and collects what went wrong: host-side failures,
// checks that failed on the device, communication errors.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/device_allocator.h"
#include "executor/cuda/device_comm.h"
#include "executor/cuda/host_transfers.h"
#include "executor/cuda/pinned_fetches.h"
#include "executor/instr.h"
#include "ops/kernels/cuda/device_error.h"

namespace pw::cuda {

struct CudaStreamOptions {
  StreamType type = StreamType::kCompute;
  int device = 0;
  int priority = 0;  // cudaStreamCreateWithPriority: lower is more urgent
  DeviceComm* comm = nullptr;
  std::shared_ptr<DeviceAllocator> allocator;
  HostTransfers* host = nullptr;
  // Shared by the backend's streams: 1 + the round (count of Synchronize calls, the same
  // on every stream, since the interpreter synchronizes all of them every step) in which
  // one of them last failed. Lets a stream blocked in communication give up (WaitIdle).
  std::atomic<uint64_t>* failed_round = nullptr;
};

class CudaStream final : public Stream {
 public:
  static StatusOr<std::unique_ptr<CudaStream>> Create(CudaStreamOptions options);
  ~CudaStream() override;

  void Enqueue(const Instr* instr) override;
  Status Synchronize() override;

  cudaStream_t handle() const { return stream_; }

 private:
  explicit CudaStream(CudaStreamOptions options) : options_(std::move(options)) {}
  int index() const { return StreamIndex(options_.type); }
  Status Run(const Instr& instr);
  Status Allocate(ValueSlot& slot, MemoryTracker& memory);
  Status WaitIdle();
  Status TakeDeviceError();
  void Note(Status s);
  void MarkFailed();

  CudaStreamOptions options_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  ops::cuda::DeviceError* error_ = nullptr;  // device memory
  PinnedFetches fetches_;
  std::vector<const Instr*> launched_;  // this step's kernels, by LaunchContext::site
  bool connected_ = false;
  uint64_t round_ = 0;     // Synchronize calls so far
  Status status_;          // first host-side failure since the last Synchronize
  bool poisoned_ = false;  // skipping: work this depends on failed
};

}  // namespace pw::cuda
