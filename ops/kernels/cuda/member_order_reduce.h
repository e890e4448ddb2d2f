#pragma once
// The device half of NCCL's member-order all-reduce (executor/comm/nccl_comm.cc): `n` slots of
// `count` elements each, one per group member in member order, reduced element by element
// as ((s0 + s1) + s2) + ... into `out`, the order the CPU transports sum in. bf16 and f16
// slots are summed in f32 and rounded once, as the CPU transports do.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/types.h"

namespace pw::ops::cuda {

void LaunchMemberOrderReduce(const void* slots, int n, int64_t count, void* out, DataType dtype,
                             bool max, cudaStream_t stream);

}  // namespace pw::ops::cuda
