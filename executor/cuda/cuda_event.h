#pragma once
// A CUDA event for one step's record/wait pair, plus a host-side poison flag. The host
// queues a record before any wait on it (the lowering guarantees it), so the flag the
// recording stream sets while queueing is already known when a waiting stream queues:
// work that depends on failed work is skipped exactly as on the CPU.

#include <cuda_runtime_api.h>

#include "executor/backend.h"

namespace pw::cuda {

class CudaEvent final : public Event {
 public:
  CudaEvent();  // a null handle if creation failed: recording it then reports the error
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t handle() const { return event_; }
  bool poisoned() const { return poisoned_; }
  void set_poisoned(bool poisoned) { poisoned_ = poisoned; }
  // A re-record replaces the previous one, so only the flag needs clearing.
  void Reset() override { poisoned_ = false; }

 private:
  cudaEvent_t event_ = nullptr;
  bool poisoned_ = false;  // host thread only
};

}  // namespace pw::cuda
