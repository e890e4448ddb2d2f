#include "executor/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "executor/cuda/cuda_event.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/cuda_stream.h"
#include "executor/cuda/device_probe.h"
#include "executor/instr.h"
#include "ir/op_def.h"
#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/find_kernel.h"
#include "ops/registry.h"

namespace pw::cuda {
namespace {

// The copy stream's slot in the allocator, after the stream types.
constexpr int kHostStreamIndex = kNumStreamTypes;
static_assert(kHostStreamIndex < DeviceAllocator::kMaxStreams);

}  // namespace

CudaBackend::CudaBackend(CudaBackendOptions options) : options_(options) {}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(CudaBackendOptions options) {
  PW_ASSIGN_OR_RETURN(int count, CudaDeviceCount());
  if (options.device < 0 || options.device >= count)
    return InvalidArgument("CUDA device ", options.device, " does not exist (", count, " visible)");
  PW_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options.device), "cudaSetDevice"));
  std::unique_ptr<CudaBackend> backend(new CudaBackend(options));
  PW_ASSIGN_OR_RETURN(backend->allocator_, DeviceAllocator::Create(options.device));
  PW_ASSIGN_OR_RETURN(backend->host_,
                      HostTransfers::Create(*backend->allocator_, kHostStreamIndex));
  return backend;
}

// Streams drain before their communicators go; memory still pending is freed while the
// streams exist, and tensors that outlive the backend are freed directly.
CudaBackend::~CudaBackend() {
  (void)cudaSetDevice(options_.device);
  for (auto& s : streams_)
    if (s) (void)cudaStreamSynchronize(s->handle());
  if (host_) (void)host_->Synchronize();
  if (allocator_) allocator_->Shutdown();
  for (auto& c : comms_) c.reset();
  for (auto& s : streams_) s.reset();
  host_.reset();
}

StatusOr<DeviceComm*> CudaBackend::CommFor(StreamType type) {
  int i = StreamIndex(type);
  if (!comm_created_[i] && options_.comm) {
    PW_ASSIGN_OR_RETURN(comms_[i], options_.comm->Create(type));
    comm_created_[i] = true;
    if (comms_[i] && !dynamic_cast<DeviceComm*>(comms_[i].get()))
      return FailedPrecondition("the CUDA backend needs device communicators (NCCL); stream ",
                                StreamTypeName(type), " got a host one");
  }
  return static_cast<DeviceComm*>(comms_[i].get());
}

StatusOr<Stream*> CudaBackend::GetStream(StreamType type) {
  int i = StreamIndex(type);
  if (!streams_[i]) {
    CudaStreamOptions o;
    o.type = type;
    o.device = options_.device;
    PW_ASSIGN_OR_RETURN(o.comm, CommFor(type));
    o.allocator = allocator_;
    o.host = host_.get();
    o.failed_round = &failed_round_;
    if (options_.stream_priorities && StreamPriority(type) > 0) {
      // CUDA counts down from `least` (0) to `greatest` (e.g. -5): one step per level.
      int least = 0, greatest = 0;
      PW_RETURN_IF_ERROR(CudaStatus(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                                    "cudaDeviceGetStreamPriorityRange"));
      o.priority = std::max(greatest, least - StreamPriority(type));
    }
    PW_ASSIGN_OR_RETURN(streams_[i], CudaStream::Create(std::move(o)));
  }
  return static_cast<Stream*>(streams_[i].get());
}

std::unique_ptr<Event> CudaBackend::CreateEvent() { return std::make_unique<CudaEvent>(); }

Status CudaBackend::Prepare(Instr& instr) {
  PW_ASSIGN_OR_RETURN(DeviceComm * comm, CommFor(instr.stream));
  instr.comm = comm;
  switch (instr.kind) {
    case Instr::Kind::kSend:
    case Instr::Kind::kRecv: {
      if (!comm)
        return FailedPrecondition(instr.where, ": stream ", StreamTypeName(instr.stream),
                                  " has no communicator (a single-rank run cannot send)");
      bool send = instr.kind == Instr::Kind::kSend;
      return comm->ExpectTransfer(instr.peer, send, instr.tag, instr.where);
    }
    case Instr::Kind::kFetch:
      return OkStatus();
    case Instr::Kind::kKernel:
      break;
  }
  instr.kernel = FindCudaKernel(instr.op->type);
  if (!instr.kernel)
    return Unimplemented(instr.where, ": no CUDA kernel for op type '", instr.op->type, "'");
  instr.context->comm = comm;
  // Collective ops name their group; declared while lowering, so that every communicator
  // is known before the first one connects (executor/cuda/device_comm.h).
  const OpDef* def = ops::Registry().Find(instr.op->type);
  if (comm && def && def->is_communication) {
    std::string group = instr.op->attrs.GetString("group", ops::kDefaultGroup);
    Status s = comm->ExpectCollective(group);
    if (!s.ok()) return s.WithContext(instr.where);
  }
  return OkStatus();
}

// The host thread calling these may not be the one that made the backend (the embedding
// API), and each thread has its own current device.
StatusOr<Tensor> CudaBackend::NewTensor(DataType dtype, const Shape& shape) {
  PW_RETURN_IF_ERROR(UseDevice(options_.device));
  return host_->Zeros(dtype, shape);
}

StatusOr<Tensor> CudaBackend::FromHost(Tensor host) {
  if (host.device() == Device::kCuda) return host;
  PW_RETURN_IF_ERROR(UseDevice(options_.device));
  return host_->Upload(host);
}

StatusOr<Tensor> CudaBackend::ToHost(const Tensor& value) {
  if (value.on_host()) return value;
  PW_RETURN_IF_ERROR(UseDevice(options_.device));
  return host_->Download(value);
}

}  // namespace pw::cuda
