#pragma once
// Communication as one stream sees it: collectives over the rank's mp or dp group (the
// ops' Communicator) plus tagged point-to-point transfers between pipeline stages. Every
// stream that communicates gets its own StreamComm with its own channels, so concurrent
// communication on different streams never interleaves.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ir/status.h"
#include "ir/stream_type.h"
#include "ops/kernel.h"
#include "ops/tensor.h"

namespace pw {

class StreamComm : public Communicator {
 public:
  // Starts sending `tensor` to global rank `peer`; the matching Recv names the same tag.
  // May return before the peer has received it (the comm keeps the storage alive), so a
  // send never waits for the receiver's queue order.
  virtual Status Send(int peer, uint64_t tag, const Tensor& tensor) = 0;
  // Receives into `tensor` (allocated with the expected size) from global rank `peer`.
  virtual Status Recv(int peer, uint64_t tag, Tensor& tensor) = 0;
  // Waits until every send started so far has been delivered.
  virtual Status Flush() = 0;

  // Connections made up front. Collectives block until every member has joined, so a rank
  // that connected lazily, one communicator at a time in its own plan order, would pay
  // for connecting inside its first step (and a transport whose joins block could
  // deadlock with a rank that reaches them in another order). Instead the backend
  // declares, while the plan is lowered, every collective group and point-to-point peer
  // its instructions use; before the first step, Connect joins them all in one order
  // every rank agrees on. A transport that connects on first use keeps the defaults.
  //
  // This stream will all-reduce over `group` ("mp", "dp", "pp").
  virtual Status ExpectCollective(std::string_view group) { return OkStatus(); }
  // This stream will send to (or receive from) global rank `peer` the transfer `tag`;
  // `where` names it in an error.
  virtual Status ExpectTransfer(int peer, bool send, uint64_t tag, const std::string& where) {
    return OkStatus();
  }
  // Connects everything expected so far on every stream of this rank (blocks until the
  // peers join); then a no-op.
  virtual Status Connect() { return OkStatus(); }
};

// Creates the StreamComm of each stream that communicates (called once per stream type,
// from the thread that will use it).
class CommFactory {
 public:
  virtual ~CommFactory() = default;
  virtual StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) = 0;
};

}  // namespace pw
