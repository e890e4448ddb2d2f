#pragma once
// The CUDA backend: a cudaStream per stream type in use (communication streams at the
// highest priority unless told otherwise), CudaEvents, the CUDA kernels of ops/
// (cuBLAS for matmul), a stream-ordered device pool for tensors, and, for streams that
// communicate, a DeviceComm from the CommFactory (NCCL between processes).
//
// Host code sees device tensors only through NewTensor / FromHost / ToHost; the
// interpreter's step loop is the same as on the CPU.

#include <array>
#include <atomic>
#include <memory>

#include "executor/backend.h"
#include "executor/comm/stream_comm.h"
#include "executor/cuda/device_allocator.h"
#include "executor/cuda/device_comm.h"
#include "executor/cuda/host_transfers.h"

namespace pw::cuda {

class CudaStream;

struct CudaBackendOptions {
  int device = 0;
  // Not owned; may be null (a single rank: collectives are the identity, no p2p). Must
  // make DeviceComms (executor/comm/nccl_comm.h).
  CommFactory* comm = nullptr;
  // Streams get the CUDA priority of their type's StreamPriority (communication first).
  bool stream_priorities = true;
};

class CudaBackend final : public Backend {
 public:
  // Fails with "no CUDA device: ..." when there is none.
  static StatusOr<std::unique_ptr<CudaBackend>> Create(CudaBackendOptions options);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  StatusOr<Stream*> GetStream(StreamType type) override;
  std::unique_ptr<Event> CreateEvent() override;
  Status Prepare(Instr& instr) override;

  StatusOr<Tensor> NewTensor(DataType dtype, const Shape& shape) override;
  StatusOr<Tensor> FromHost(Tensor host) override;
  StatusOr<Tensor> ToHost(const Tensor& value) override;

  int device() const { return options_.device; }

 private:
  explicit CudaBackend(CudaBackendOptions options);
  StatusOr<DeviceComm*> CommFor(StreamType type);

  CudaBackendOptions options_;
  std::shared_ptr<DeviceAllocator> allocator_;
  std::unique_ptr<HostTransfers> host_;
  std::atomic<uint64_t> failed_round_{0};
  std::array<std::unique_ptr<StreamComm>, kNumStreamTypes> comms_;
  std::array<bool, kNumStreamTypes> comm_created_{};
  std::array<std::unique_ptr<CudaStream>, kNumStreamTypes> streams_;
};

}  // namespace pw::cuda
