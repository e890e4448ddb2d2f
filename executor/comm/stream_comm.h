#pragma once
// Communication as one stream sees it: collectives over the rank's mp or dp group (the
// ops' Communicator) plus tagged point-to-point transfers between pipeline stages. Every
// stream that communicates gets its own StreamComm with its own channels, so concurrent
// communication on different streams never interleaves.

#include <cstdint>
#include <memory>

#include "ir/stream_type.h"
#include "ir/status.h"
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
};

// Creates the StreamComm of each stream that communicates (called once per stream type,
// from the thread that will use it).
class CommFactory {
 public:
  virtual ~CommFactory() = default;
  virtual StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) = 0;
};

}  // namespace pw
