#pragma once
// What the CUDA backend needs from a communicator besides StreamComm: transfers queued on
// the stream of the calling launch (ops/kernels/cuda/launch.h) over device pointers, and
// connections made up front (StreamComm's Expect* and Connect, which a device
// communicator must implement: device collectives block until every member has joined).
// NCCL implements it (executor/comm/nccl_comm.h).

#include <cstdint>
#include <string>
#include <string_view>

#include "executor/comm/stream_comm.h"

namespace pw::cuda {

class DeviceComm : public StreamComm {
 public:
  // Transfers between two ranks are matched in queue order, so ExpectTransfer's tags say
  // which transfer each is, and its `where` names it if the peer's order differs.
  Status ExpectCollective(std::string_view group) override = 0;
  Status ExpectTransfer(int peer, bool send, uint64_t tag, const std::string& where) override = 0;
  Status Connect() override = 0;
  // After a failure: makes queued transfers return so streams can drain. The comm refuses
  // all later work.
  virtual void Abort() = 0;
};

}  // namespace pw::cuda
