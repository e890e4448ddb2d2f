#include "executor/cuda/kernel_timer.h"

#include <cublas_v2.h>

#include <map>
#include <memory>
#include <mutex>

#include "executor/cuda/cuda_status.h"
#include "executor/cuda/device_allocator.h"
#include "executor/cuda/device_probe.h"
#include "ops/kernels/cuda/device_error.h"
#include "ops/kernels/cuda/find_kernel.h"
#include "ops/kernels/cuda/launch.h"
#include "ops/op_run.h"

namespace pw::cuda {
namespace {

// What every timed kernel on a device shares: one stream (with its cuBLAS handle and
// device-error record) and the pool, made on first use and kept for the process.
struct TimingDevice {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  ops::cuda::DeviceError* error = nullptr;
  std::shared_ptr<DeviceAllocator> allocator;
};

StatusOr<TimingDevice*> GetTimingDevice(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<TimingDevice>>* devices =
      new std::map<int, std::unique_ptr<TimingDevice>>;
  std::lock_guard<std::mutex> lock(mu);
  PW_RETURN_IF_ERROR(UseDevice(device));
  auto& slot = (*devices)[device];
  if (slot) return slot.get();
  auto d = std::make_unique<TimingDevice>();
  PW_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
                                "creating the timing stream"));
  if (cublasCreate(&d->blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(d->blas, d->stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
    return Internal("cannot create a cuBLAS handle on device ", device);
  void* error = nullptr;
  PW_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&error, sizeof(ops::cuda::DeviceError)), "device error record"));
  d->error = static_cast<ops::cuda::DeviceError*>(error);
  PW_RETURN_IF_ERROR(CudaStatus(cudaMemset(d->error, 0, sizeof(ops::cuda::DeviceError)), "memset"));
  PW_ASSIGN_OR_RETURN(d->allocator, DeviceAllocator::Create(device));
  d->allocator->SetStream(0, d->stream);
  d->allocator->SetHostStream(0);
  slot = std::move(d);
  return slot.get();
}

// Two events per run, made once.
class EventPairs {
 public:
  ~EventPairs() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }
  StatusOr<std::pair<cudaEvent_t, cudaEvent_t>> Get(size_t run) {
    while (events_.size() < 2 * (run + 1)) {
      cudaEvent_t e = nullptr;
      PW_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&e), "cudaEventCreate"));
      events_.push_back(e);
    }
    return std::make_pair(events_[2 * run], events_[2 * run + 1]);
  }

 private:
  std::vector<cudaEvent_t> events_;
};

}  // namespace

bool HasKernel(const std::string& op_type) { return FindCudaKernel(op_type) != nullptr; }

StatusOr<std::vector<double>> TimeKernel(int device, const KernelTiming& timing) {
  CpuKernel kernel = FindCudaKernel(timing.op->type);
  if (!kernel) return NotFound("no CUDA kernel for op type '", timing.op->type, "'");
  PW_ASSIGN_OR_RETURN(TimingDevice * d, GetTimingDevice(device));
  DeviceAllocator& allocator = *d->allocator;
  const auto upload = [&](Tensor host) -> StatusOr<Tensor> {
    PW_ASSIGN_OR_RETURN(Tensor t, allocator.Allocate(host.dtype(), host.shape(), 0));
    if (host.nbytes() > 0)
      PW_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(t.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, d->stream),
          "copy to the device"));
    PW_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(d->stream), "copy to the device"));
    return t;
  };
  const auto allocate = [&](const Var& decl) {
    return allocator.Allocate(decl.dtype, decl.shape, 0);
  };
  PW_ASSIGN_OR_RETURN(std::unique_ptr<ops::OpRun> run,
                      ops::OpRun::Create(*timing.op, *timing.vars, timing.label, upload));

  ops::cuda::LaunchContext launch{d->stream, d->blas, allocator.pool(), d->error, 0};
  ops::cuda::ScopedLaunch scope(launch);
  DeviceAllocator::ReleaseScope release(allocator, 0);
  EventPairs events;
  // Runs are queued in batches and read back after each, so a kernel far shorter than a
  // launch still gets its device time, and long ones stop once `min_seconds` is reached.
  std::vector<double> samples;
  double spent = 0;
  const int max_runs = std::max(timing.repeats, 1) * 50;
  int done = 0;
  while (done < timing.warmup + max_runs) {
    if (done >= timing.warmup + timing.repeats && spent >= timing.min_seconds) break;
    const int batch = std::min(std::max(timing.repeats, 1), timing.warmup + max_runs - done);
    for (int i = 0; i < batch; ++i) {
      PW_ASSIGN_OR_RETURN(auto pair, events.Get(i));
      run->ReleaseOutputs();
      PW_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(pair.first, d->stream), "cudaEventRecord"));
      PW_RETURN_IF_ERROR(run->AllocateOutputs(allocate));
      (void)cudaGetLastError();
      Status s = kernel(run->context());
      if (!s.ok()) return s.WithContext(StrCat("running ", timing.label, " on CUDA"));
      PW_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(pair.second, d->stream), "cudaEventRecord"));
    }
    PW_RETURN_IF_ERROR(
        CudaStatus(cudaStreamSynchronize(d->stream), StrCat("running ", timing.label, " on CUDA")));
    ops::cuda::DeviceError reported{};
    PW_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(&reported, d->error, sizeof(reported), cudaMemcpyDeviceToHost), "error record"));
    if (reported.code != ops::cuda::kNoDeviceError) {
      (void)cudaMemset(d->error, 0, sizeof(ops::cuda::DeviceError));  // for the next op
      return FailedPrecondition(timing.label, ": ", ops::cuda::DescribeDeviceError(reported));
    }
    for (int i = 0; i < batch; ++i, ++done) {
      PW_ASSIGN_OR_RETURN(auto pair, events.Get(i));
      float ms = 0;
      PW_RETURN_IF_ERROR(
          CudaStatus(cudaEventElapsedTime(&ms, pair.first, pair.second), "cudaEventElapsedTime"));
      if (done < timing.warmup) continue;
      samples.push_back(1e-3 * ms);
      spent += samples.back();
    }
  }
  run->ReleaseOutputs();
  allocator.Collect();
  return samples;
}

StatusOr<CudaDeviceInfo> DeviceInfo(int device) {
  PW_RETURN_IF_ERROR(CudaDeviceCount().status());
  cudaDeviceProp prop{};
  PW_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"));
  return CudaDeviceInfo{prop.name, static_cast<int64_t>(prop.totalGlobalMem),
                        prop.multiProcessorCount};
}

}  // namespace pw::cuda
