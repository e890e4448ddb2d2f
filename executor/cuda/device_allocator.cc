#include "executor/cuda/device_allocator.h"

#include <limits>

#include "executor/cuda/cuda_status.h"

namespace pw::cuda {
namespace {

// The stream frees on this thread are ordered on (see ReleaseScope).
thread_local const DeviceAllocator* scope_allocator = nullptr;
thread_local int scope_index = -1;

}  // namespace

// Frees through the allocator that made the memory; `used_by` collects, one bit per
// stream, every stream that touched it (MarkUse finds it with std::get_deleter).
struct DeviceAllocator::Deleter {
  std::shared_ptr<DeviceAllocator> owner;
  uint32_t used_by;
  void operator()(std::byte* p) const { owner->Free(p, used_by); }
};

StatusOr<std::shared_ptr<DeviceAllocator>> DeviceAllocator::Create(int device) {
  int supported = 0;
  PW_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
                 "cudaDeviceGetAttribute"));
  if (!supported)
    return FailedPrecondition("CUDA device ", device, " has no stream-ordered memory pools");
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  PW_RETURN_IF_ERROR(CudaStatus(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate"));
  std::shared_ptr<DeviceAllocator> allocator(new DeviceAllocator(pool));
  // Keep freed memory for the next step instead of returning it at every synchronize.
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  PW_RETURN_IF_ERROR(CudaStatus(
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "memory pool"));
  int off = 0;
  PW_RETURN_IF_ERROR(
      CudaStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off),
                 "memory pool"));
  return allocator;
}

DeviceAllocator::~DeviceAllocator() {
  Shutdown();
  for (cudaEvent_t e : spare_events_) (void)cudaEventDestroy(e);
  // Destroying a pool with allocations outstanding is deferred by CUDA until they go.
  (void)cudaMemPoolDestroy(pool_);
}

void DeviceAllocator::SetStream(int index, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_[index] = stream;
}

StatusOr<Tensor> DeviceAllocator::Allocate(DataType dtype, const Shape& shape, int index) {
  const int64_t bytes = NumElements(shape) * DataTypeSize(dtype);
  const size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
  cudaStream_t stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CollectLocked(false);
    stream = streams_[index];
  }
  void* p = nullptr;
  Status s = CudaStatus(cudaMallocFromPoolAsync(&p, size, pool_, stream),
                        StrCat("allocating ", bytes, " bytes"));
  if (!s.ok()) return s;
  s = CudaStatus(cudaMemsetAsync(p, 0, size, stream), "zero fill");
  if (!s.ok()) {
    (void)cudaFreeAsync(p, stream);
    return s;
  }
  std::shared_ptr<std::byte> storage(static_cast<std::byte*>(p),
                                     Deleter{shared_from_this(), 1u << index});
  return Tensor(dtype, shape, std::move(storage), Device::kCuda);
}

void DeviceAllocator::MarkUse(const Tensor& tensor, int index) {
  if (auto* d = std::get_deleter<Deleter>(tensor.storage())) d->used_by |= 1u << index;
}

DeviceAllocator::ReleaseScope::ReleaseScope(DeviceAllocator& allocator, int index)
    : saved_allocator_(scope_allocator), saved_index_(scope_index) {
  scope_allocator = &allocator;
  scope_index = index;
}

DeviceAllocator::ReleaseScope::~ReleaseScope() {
  scope_allocator = saved_allocator_;
  scope_index = saved_index_;
}

void DeviceAllocator::Free(void* ptr, uint32_t used_by) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) {
    (void)cudaFree(ptr);  // nothing runs any more
    return;
  }
  const int release = scope_allocator == this ? scope_index : host_index_;
  const uint32_t others = used_by & ~(1u << release);
  if (others == 0) {
    (void)cudaFreeAsync(ptr, streams_[release]);
    return;
  }
  // Each event marks the point the other stream has reached now, which is past its last
  // use: every use was queued before this release.
  Pending pending{ptr, release, {}};
  for (int i = 0; i < kMaxStreams; ++i) {
    if (!(others & (1u << i)) || !streams_[i]) continue;
    cudaEvent_t e = TakeEventLocked();
    if (e && cudaEventRecord(e, streams_[i]) == cudaSuccess) {
      pending.others.push_back(e);
    } else {
      // Without an event there is no safe point to wait for: keep the memory until the
      // streams are idle (Shutdown) rather than risk reuse.
      if (e) spare_events_.push_back(e);
      pending.others.push_back(nullptr);
    }
  }
  pending_.push_back(std::move(pending));
}

cudaEvent_t DeviceAllocator::TakeEventLocked() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return nullptr;
  return e;
}

void DeviceAllocator::Collect() {
  std::lock_guard<std::mutex> lock(mu_);
  CollectLocked(false);
}

// `all`: the streams are idle, so every pending free is safe.
void DeviceAllocator::CollectLocked(bool all) {
  std::vector<Pending> waiting;
  for (Pending& p : pending_) {
    bool done = true;
    for (cudaEvent_t e : p.others) {
      if (all) break;
      // A missing event never completes; any answer but "not ready" means the stream is
      // past the event (or broken, and then nothing reads the memory either).
      if (!e || cudaEventQuery(e) == cudaErrorNotReady) {
        done = false;
        break;
      }
    }
    if (!done) {
      waiting.push_back(std::move(p));
      continue;
    }
    for (cudaEvent_t e : p.others)
      if (e) spare_events_.push_back(e);
    if (all)
      (void)cudaFree(p.ptr);
    else
      (void)cudaFreeAsync(p.ptr, streams_[p.release]);
  }
  pending_ = std::move(waiting);
}

void DeviceAllocator::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  CollectLocked(true);
  shut_down_ = true;
  streams_.fill(nullptr);
}

}  // namespace pw::cuda
