// transpose: one thread per output element gathers its source element. Split, concat
// and reshape are strided copies the host queues with cudaMemcpy2DAsync.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

template <typename T>
__global__ void TransposeKernel(const T* in, T* out, int64_t numel, TransposeDims dims) {
  for (int64_t i = GlobalThread(); i < numel; i += GlobalStride()) {
    int64_t rest = i, src = 0;
    for (int k = dims.rank - 1; k >= 0; --k) {
      int64_t idx = rest % dims.out_dims[k];
      rest /= dims.out_dims[k];
      src += idx * dims.src_stride[k];
    }
    out[i] = in[src];
  }
}

template <typename T>
void Launch(const void* in, void* out, int64_t numel, const TransposeDims& dims,
            cudaStream_t stream) {
  TransposeKernel<<<GridFor(numel), kThreads, 0, stream>>>(static_cast<const T*>(in),
                                                           static_cast<T*>(out), numel, dims);
}

}  // namespace

void LaunchTranspose(const void* in, void* out, int64_t numel, const TransposeDims& dims,
                     int elem_size, cudaStream_t stream) {
  if (numel == 0) return;
  switch (elem_size) {
    case 8:
      Launch<unsigned long long>(in, out, numel, dims, stream);
      break;
    case 4:
      Launch<unsigned int>(in, out, numel, dims, stream);
      break;
    case 2:
      Launch<unsigned short>(in, out, numel, dims, stream);
      break;
  }
}

}  // namespace pw::ops::cuda
