#pragma once
// Device memory for tensors, from a stream-ordered pool: an allocation is ordered on the
// stream that first writes it, and a free on the stream whose release was the last use.
//
// A tensor several streams touch must not be reused while any of them may still read it.
// The allocator remembers which streams used each allocation (MarkUse); when the last
// release happens on one stream, it records an event on each of the others and gives the
// memory back only once those events have completed (Collect). No stream ever waits for
// a free, so freeing never adds a dependency between streams — one could deadlock streams
// that are blocked in communication with other ranks. The pool never reuses memory by
// inserting such dependencies itself (cudaMemPoolReuseAllowInternalDependencies is off).

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw::cuda {

class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  static constexpr int kMaxStreams = 8;

  // A pool on `device`, which must be current.
  static StatusOr<std::shared_ptr<DeviceAllocator>> Create(int device);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // Registers stream `index` (< kMaxStreams); `host_index` is the stream frees outside any
  // ReleaseScope are ordered on (the host's copy stream).
  void SetStream(int index, cudaStream_t stream);
  void SetHostStream(int index) { host_index_ = index; }

  // A zero-filled tensor, ordered on stream `index`.
  StatusOr<Tensor> Allocate(DataType dtype, const Shape& shape, int index);
  // Stream `index` reads or writes `tensor`. A no-op for other tensors.
  static void MarkUse(const Tensor& tensor, int index);
  // Gives back memory whose other users have finished.
  void Collect();
  // Every stream is idle and about to go: frees what is pending; later frees are
  // immediate (a tensor may outlive the backend).
  void Shutdown();

  cudaMemPool_t pool() const { return pool_; }

  // Tensors released on this thread while the scope lives are freed on stream `index`.
  class ReleaseScope {
   public:
    ReleaseScope(DeviceAllocator& allocator, int index);
    ~ReleaseScope();
    ReleaseScope(const ReleaseScope&) = delete;
    ReleaseScope& operator=(const ReleaseScope&) = delete;

   private:
    const DeviceAllocator* saved_allocator_;
    int saved_index_;
  };

 private:
  struct Deleter;
  struct Pending {
    void* ptr;
    int release;                      // stream the free is ordered on
    std::vector<cudaEvent_t> others;  // recorded on the other users
  };

  explicit DeviceAllocator(cudaMemPool_t pool) : pool_(pool) {}
  void Free(void* ptr, uint32_t used_by);
  void CollectLocked(bool all);
  cudaEvent_t TakeEventLocked();

  cudaMemPool_t pool_;
  int host_index_ = 0;
  std::mutex mu_;
  std::array<cudaStream_t, kMaxStreams> streams_{};  // guarded by mu_
  std::vector<Pending> pending_;                     // guarded by mu_
  std::vector<cudaEvent_t> spare_events_;            // guarded by mu_
  bool shut_down_ = false;                           // guarded by mu_
};

}  // namespace pw::cuda
