#pragma once
// Communication between ranks over NCCL, for the CUDA backend: collectives and
// point-to-point transfers on device memory, queued on the stream of the calling launch
// (ops/kernels/cuda/launch.h). As with Gloo, collectives get one communicator per (stream,
// group), so collectives on different streams never interleave. Transfers get one per
// ordered pair of ranks, used by the sender's pp_send stream and the receiver's pp_recv
// stream: NCCL has no tags and matches a send with a receive of the same communicator in
// queue order, so when connecting, both sides compare the order of their transfers (by
// tag) and refuse a plan whose orders differ instead of exchanging the wrong tensors.
// Each communicator's NCCL unique id goes from its first member to the others through the
// run's KvStore. The comms are cuda::DeviceComm: everything a rank will use is declared
// while its plan is lowered and connected before the first transfer, in key order.

#include <chrono>
#include <memory>

#include "executor/comm/kv_store.h"
#include "executor/comm/stream_comm.h"
#include "ir/rank_layout.h"

namespace pw {

struct NcclOptions {
  // How long a rank waits in the store for a peer's unique id or transfer order.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

// `store` must outlive the factory and every comm it makes.
StatusOr<std::unique_ptr<CommFactory>> MakeNcclCommFactory(KvStore& store, const Mesh& mesh,
                                                           int rank, NcclOptions options = {});

}  // namespace pw
