#include "executor/cuda/cuda_stream.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "executor/cuda/cuda_event.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/device_probe.h"
#include "ops/kernels/cuda/launch.h"

namespace pw::cuda {
namespace {

// How long a stream still blocked in communication may take to drain once another stream
// of the rank has failed, before its communicator is aborted.
constexpr std::chrono::seconds kDrainAfterFailure{10};

Status CublasStatus(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return OkStatus();
  return Internal(what, ": ", cublasGetStatusString(s));
}

}  // namespace

StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(CudaStreamOptions options) {
  std::unique_ptr<CudaStream> s(new CudaStream(std::move(options)));
  const char* name = StreamTypeName(s->options_.type);
  PW_RETURN_IF_ERROR(UseDevice(s->options_.device));
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaStreamCreateWithPriority(&s->stream_, cudaStreamNonBlocking, s->options_.priority),
      StrCat("creating stream ", name)));
  PW_RETURN_IF_ERROR(CublasStatus(cublasCreate(&s->blas_), "cublasCreate"));
  PW_RETURN_IF_ERROR(CublasStatus(cublasSetStream(s->blas_, s->stream_), "cublasSetStream"));
  // Plain f32 GEMMs (no TF32), like the CPU's.
  PW_RETURN_IF_ERROR(CublasStatus(cublasSetMathMode(s->blas_, CUBLAS_DEFAULT_MATH), "cuBLAS"));
  void* error = nullptr;
  PW_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&error, sizeof(ops::cuda::DeviceError)), "device error record"));
  s->error_ = static_cast<ops::cuda::DeviceError*>(error);
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaMemsetAsync(s->error_, 0, sizeof(ops::cuda::DeviceError), s->stream_), "memset"));
  s->options_.allocator->SetStream(s->index(), s->stream_);
  return s;
}

CudaStream::~CudaStream() {
  if (stream_) (void)cudaStreamSynchronize(stream_);
  if (error_) (void)cudaFree(error_);
  if (blas_) (void)cublasDestroy(blas_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void CudaStream::MarkFailed() {
  if (options_.failed_round) options_.failed_round->store(round_ + 1, std::memory_order_relaxed);
}

void CudaStream::Note(Status s) {
  if (s.ok() || !status_.ok()) return;
  status_ = std::move(s);
  MarkFailed();
}

// Each host thread has its own current device; the embedding API may step from any.
void CudaStream::Enqueue(const Instr* instr) {
  Note(UseDevice(options_.device));
  Note(options_.host->Fence(index(), stream_));
  bool ok = status_.ok() && !poisoned_;
  for (Event* e : instr->waits) {
    auto* event = static_cast<CudaEvent*>(e);
    Note(CudaStatus(cudaStreamWaitEvent(stream_, event->handle(), 0), "cudaStreamWaitEvent")
             .WithContext(instr->where));
    ok = ok && !event->poisoned();  // work this depends on failed: skip, report nothing
  }
  poisoned_ = !ok;
  if (ok) {
    Status s = Run(*instr);
    if (!s.ok()) Note(s.WithContext(instr->where));
    ok = s.ok();
  }
  // Recorded even when skipped, so no wait on it refers to an older record.
  for (Event* e : instr->records) {
    auto* event = static_cast<CudaEvent*>(e);
    event->set_poisoned(!ok);
    Note(CudaStatus(cudaEventRecord(event->handle(), stream_), "cudaEventRecord")
             .WithContext(instr->where));
  }
  for (ValueSlot* slot : instr->uses) DeviceAllocator::MarkUse(slot->tensor, index());
  DeviceAllocator::ReleaseScope scope(*options_.allocator, index());
  instr->ReleaseUses();
}

Status CudaStream::Allocate(ValueSlot& slot, MemoryTracker& memory) {
  PW_ASSIGN_OR_RETURN(Tensor t, options_.allocator->Allocate(slot.dtype, slot.shape, index()));
  slot.Bind(std::move(t), memory);
  return OkStatus();
}

Status CudaStream::Run(const Instr& instr) {
  ops::cuda::LaunchContext launch{stream_, blas_, options_.allocator->pool(), error_,
                                  static_cast<int>(launched_.size())};
  ops::cuda::ScopedLaunch scope(launch);
  if (instr.comm && !connected_) {
    // Every instruction has been prepared by now, so the comm knows all it will need.
    PW_RETURN_IF_ERROR(options_.comm->Connect());
    connected_ = true;
  }
  switch (instr.kind) {
    case Instr::Kind::kKernel:
      if (instr.view_source) {
        instr.BindViews();  // host-side pointers only: no work on the stream
        return OkStatus();
      }
      for (ValueSlot* out : instr.outputs)
        if (!out->tensor.defined()) PW_RETURN_IF_ERROR(Allocate(*out, *instr.memory));
      launched_.push_back(&instr);
      (void)cudaGetLastError();  // so the kernel's launch check sees only its own errors
      return instr.kernel(const_cast<KernelContext&>(*instr.context));
    case Instr::Kind::kSend:
      if (!instr.value->tensor.defined()) return Internal("'", instr.value->name, "' has no value");
      return instr.comm->Send(instr.peer, instr.tag, instr.value->tensor);
    case Instr::Kind::kRecv:
      if (!instr.value->tensor.defined()) PW_RETURN_IF_ERROR(Allocate(*instr.value, *instr.memory));
      return instr.comm->Recv(instr.peer, instr.tag, instr.value->tensor);
    case Instr::Kind::kFetch: {
      const Tensor& t = instr.value->tensor;
      if (!t.defined() || t.dtype() != DataType::kFloat32 || t.numel() != 1)
        return Internal("'", instr.value->name, "' is not an f32 scalar");
      if (t.on_host()) {
        *instr.fetch_to = static_cast<double>(t.f32()[0]);
        return OkStatus();
      }
      return fetches_.Add(t.raw(), instr.fetch_to, stream_);
    }
  }
  return Internal("unknown instruction kind");
}

// Polls rather than blocks, so that a stream stuck in a transfer whose peer will never
// come (this rank failed elsewhere and skipped its side) can be released by aborting the
// communicator instead of hanging the rank.
Status CudaStream::WaitIdle() {
  auto failed_since = std::chrono::steady_clock::time_point::max();
  auto nap = std::chrono::microseconds(20);
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e != cudaErrorNotReady)
      return CudaStatus(e, StrCat("stream ", StreamTypeName(options_.type)));
    auto now = std::chrono::steady_clock::now();
    if (options_.failed_round && options_.comm &&
        options_.failed_round->load(std::memory_order_relaxed) == round_ + 1) {
      if (failed_since == std::chrono::steady_clock::time_point::max()) failed_since = now;
      if (now - failed_since > kDrainAfterFailure) {
        options_.comm->Abort();
        (void)cudaStreamSynchronize(stream_);
        return Aborted("stream ", StreamTypeName(options_.type),
                       ": communication aborted after a failure on this rank");
      }
    }
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(2));
  }
}

// The first device-side check that failed since the last call, as an error naming the
// instruction; the record is cleared for the next step.
Status CudaStream::TakeDeviceError() {
  ops::cuda::DeviceError e{};
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(&e, error_, sizeof(e), cudaMemcpyDeviceToHost, stream_), "error record"));
  PW_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "error record"));
  if (e.code == ops::cuda::kNoDeviceError) return OkStatus();
  PW_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(error_, 0, sizeof(ops::cuda::DeviceError), stream_),
                                "error record"));
  Status s = InvalidArgument(ops::cuda::DescribeDeviceError(e));
  if (e.site >= 0 && static_cast<size_t>(e.site) < launched_.size())
    s = s.WithContext(launched_[e.site]->where);
  return s;
}

Status CudaStream::Synchronize() {
  Status waited = WaitIdle();
  Status status = std::move(status_);
  status_ = OkStatus();
  if (status.ok()) status = waited;
  if (status.ok() && poisoned_) status = Aborted("skipped: work it depends on failed");
  poisoned_ = false;
  if (waited.ok()) {
    Status device = TakeDeviceError();
    if (status.ok()) status = device;
  }
  fetches_.Finish(waited.ok());
  launched_.clear();
  options_.allocator->Collect();
  if (options_.comm && status.ok())
    status = options_.comm->Flush().WithContext(StreamTypeName(options_.type));
  if (!status.ok()) MarkFailed();
  ++round_;
  return status;
}

}  // namespace pw::cuda
