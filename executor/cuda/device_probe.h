#pragma once
// Whether this process can use a GPU. Backends, the command line and tests ask before
// touching CUDA, so that a machine without a device gets one clear message.

#include "ir/status.h"

namespace pw::cuda {

// The number of visible devices (>= 1), or an error starting "no CUDA device: " that
// says why (no driver, driver too old, CUDA_VISIBLE_DEVICES empty, ...).
StatusOr<int> CudaDeviceCount();

// Makes `device` the calling thread's current device (a no-op when it already is).
Status UseDevice(int device);

}  // namespace pw::cuda
