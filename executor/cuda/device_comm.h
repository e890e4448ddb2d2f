#pragma once
// What the CUDA backend needs from a communicator besides StreamComm: transfers queued on
// the stream of the calling launch (ops/kernels/cuda/launch.h) over device pointers, and
// connections made up front. Device collectives block until every member has joined, so
// a rank cannot connect lazily, one communicator at a time, in its own plan order without
// risking a deadlock with a rank that reaches them in another order. Instead the backend
// declares, while the plan is lowered, every collective group and point-to-point peer its
// instructions use; before the first transfer, Connect joins them all in one order every
// rank agrees on. NCCL implements it (executor/comm/nccl_comm.h).

#include <cstdint>
#include <string>
#include <string_view>

#include "executor/comm/stream_comm.h"

namespace pw::cuda {

class DeviceComm : public StreamComm {
 public:
  // This stream will all-reduce over `group` ("mp", "dp").
  virtual Status ExpectCollective(std::string_view group) = 0;
  // This stream will send to (or receive from) global rank `peer`; transfers between two
  // ranks are matched in queue order, so the tags say which transfer this is, and `where`
  // names it in an error if the peer's order differs.
  virtual Status ExpectTransfer(int peer, bool send, uint64_t tag, const std::string& where) = 0;
  // Connects everything expected so far (blocks until the peers join); then a no-op.
  virtual Status Connect() = 0;
  // After a failure: makes queued transfers return so streams can drain. The comm refuses
  // all later work.
  virtual void Abort() = 0;
};

}  // namespace pw::cuda
