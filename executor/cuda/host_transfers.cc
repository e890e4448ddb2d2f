#include "executor/cuda/host_transfers.h"

#include "executor/cuda/cuda_status.h"

namespace pw::cuda {

StatusOr<std::unique_ptr<HostTransfers>> HostTransfers::Create(DeviceAllocator& allocator,
                                                               int index) {
  std::unique_ptr<HostTransfers> t(new HostTransfers(allocator, index));
  PW_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&t->stream_, cudaStreamNonBlocking),
                                "creating the copy stream"));
  PW_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&t->done_, cudaEventDisableTiming),
                                "creating the copy event"));
  allocator.SetStream(index, t->stream_);
  allocator.SetHostStream(index);
  return t;
}

HostTransfers::~HostTransfers() {
  if (stream_) (void)cudaStreamSynchronize(stream_);
  if (done_) (void)cudaEventDestroy(done_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

StatusOr<Tensor> HostTransfers::Zeros(DataType dtype, const Shape& shape) {
  ++queued_;
  return allocator_.Allocate(dtype, shape, index_);
}

StatusOr<Tensor> HostTransfers::Upload(const Tensor& host) {
  PW_ASSIGN_OR_RETURN(Tensor device, allocator_.Allocate(host.dtype(), host.shape(), index_));
  ++queued_;
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(device.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream_),
      "copy to the device"));
  // Pageable memory may still be read after the call returns; only the copy stream waits.
  PW_RETURN_IF_ERROR(Synchronize());
  return device;
}

StatusOr<Tensor> HostTransfers::Download(const Tensor& device) {
  Tensor host(device.dtype(), device.shape());
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host.raw(), device.raw(), device.nbytes(), cudaMemcpyDeviceToHost, stream_),
      "copy to the host"));
  PW_RETURN_IF_ERROR(Synchronize());
  return host;
}

Status HostTransfers::Fence(int index, cudaStream_t stream) {
  if (seen_[index] == queued_) return OkStatus();
  if (recorded_ != queued_) {
    PW_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
    recorded_ = queued_;
  }
  // Waits for the record made just now or earlier, which covers everything queued.
  PW_RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(stream, done_, 0), "cudaStreamWaitEvent"));
  seen_[index] = queued_;
  return OkStatus();
}

Status HostTransfers::Synchronize() {
  return CudaStatus(cudaStreamSynchronize(stream_), "copy stream");
}

}  // namespace pw::cuda
