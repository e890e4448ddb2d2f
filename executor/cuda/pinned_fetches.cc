#include "executor/cuda/pinned_fetches.h"

#include "executor/cuda/cuda_status.h"

namespace pw::cuda {

PinnedFetches::~PinnedFetches() {
  for (float* b : blocks_) (void)cudaFreeHost(b);
}

Status PinnedFetches::Add(const void* device, double* to, cudaStream_t stream) {
  const size_t i = targets_.size();
  if (i / kBlock == blocks_.size()) {
    void* block = nullptr;
    PW_RETURN_IF_ERROR(
        CudaStatus(cudaMallocHost(&block, kBlock * sizeof(float)), "cudaMallocHost"));
    blocks_.push_back(static_cast<float*>(block));
  }
  float* slot = blocks_[i / kBlock] + i % kBlock;
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(slot, device, sizeof(float), cudaMemcpyDeviceToHost, stream), "fetch"));
  targets_.push_back(to);
  return OkStatus();
}

void PinnedFetches::Finish(bool deliver) {
  if (deliver) {
    for (size_t i = 0; i < targets_.size(); ++i)
      *targets_[i] = static_cast<double>(blocks_[i / kBlock][i % kBlock]);
  }
  targets_.clear();
}

}  // namespace pw::cuda
