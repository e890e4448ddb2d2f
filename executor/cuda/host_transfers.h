#pragma once
// What the host thread puts on or reads from the device between instructions: zeroed
// gradient sums, fed inputs, parameters. It all runs on one copy stream of its own; the
// first instruction a stream queues after such work waits for it through one event, so
// the host never blocks on the compute streams and they never wait on a copy twice.

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>

#include "executor/cuda/device_allocator.h"
#include "ir/status.h"
#include "ops/tensor.h"

namespace pw::cuda {

class HostTransfers {
 public:
  // Registers the copy stream with `allocator` as stream `index`, which also orders the
  // frees the host makes outside any stream.
  static StatusOr<std::unique_ptr<HostTransfers>> Create(DeviceAllocator& allocator, int index);
  ~HostTransfers();
  HostTransfers(const HostTransfers&) = delete;
  HostTransfers& operator=(const HostTransfers&) = delete;

  StatusOr<Tensor> Zeros(DataType dtype, const Shape& shape);
  // Copies a host tensor to the device. Returns once the copy is done, so the caller
  // may drop `host` (pageable memory) at once.
  StatusOr<Tensor> Upload(const Tensor& host);
  // A host copy of a device tensor no stream is still writing.
  StatusOr<Tensor> Download(const Tensor& device);
  // Makes stream `index` wait for the copy stream's work queued so far.
  Status Fence(int index, cudaStream_t stream);
  Status Synchronize();

 private:
  HostTransfers(DeviceAllocator& allocator, int index) : allocator_(allocator), index_(index) {}

  DeviceAllocator& allocator_;
  int index_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  uint64_t queued_ = 0;    // work items queued on the copy stream
  uint64_t recorded_ = 0;  // queued_ when done_ was last recorded
  std::array<uint64_t, DeviceAllocator::kMaxStreams> seen_{};  // per stream: queued_ waited for
};

}  // namespace pw::cuda
