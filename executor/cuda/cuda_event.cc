#include "executor/cuda/cuda_event.h"

namespace pw::cuda {

// Timing is off: it makes record and wait cheaper, and nothing reads elapsed times.
CudaEvent::CudaEvent() {
  if (cudaEventCreateWithFlags(&event_, cudaEventDisableTiming) != cudaSuccess) event_ = nullptr;
}

CudaEvent::~CudaEvent() {
  if (event_) (void)cudaEventDestroy(event_);
}

}  // namespace pw::cuda
