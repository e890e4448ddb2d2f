#pragma once
// Scalars (losses) a stream copies to the host during a step. Each copy lands in pinned
// memory, in stream order, and is converted into its destination once the stream is
// idle. Blocks are never moved while copies may be in flight.

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "ir/status.h"

namespace pw::cuda {

class PinnedFetches {
 public:
  PinnedFetches() = default;
  ~PinnedFetches();
  PinnedFetches(const PinnedFetches&) = delete;
  PinnedFetches& operator=(const PinnedFetches&) = delete;

  // Queues a copy of the f32 at `device` on `stream`; Finish writes it to `*to`.
  Status Add(const void* device, double* to, cudaStream_t stream);
  // The stream is idle: delivers every value (when `deliver`) and starts over.
  void Finish(bool deliver);

 private:
  static constexpr int kBlock = 256;  // floats per pinned block
  std::vector<float*> blocks_;
  std::vector<double*> targets_;  // one per queued copy, in order
};

}  // namespace pw::cuda
