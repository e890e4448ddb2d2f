#pragma once
// All-reduce over a ring of TCP connections that the calling thread drives alone.
//
// Why not Gloo's collectives: Gloo's TCP transport hands every message to its network
// thread. One transfer is a handshake (send-ready, recv-ready, then the data) in which the
// network threads of both sides must wake, and then the caller; the network thread also
// spins on the connection's lock (level-triggered epoll, try_lock) while the caller holds
// it. Where ranks share cores every one of those wake-ups waits for a core. Here the
// caller writes to its right neighbour and reads from its left one itself, on
// non-blocking sockets under poll(): it sleeps only until bytes arrive, and no other
// thread runs on its behalf.
//
// Every member gets the same bits, run after run: each element is reduced in an order
// fixed by the member indices alone (two members: member 0's value first).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/kv_store.h"
#include "ir/status.h"
#include "ops/kernel.h"

namespace pw {

struct TcpRingOptions {
  std::string hostname = "127.0.0.1";  // address this member listens on
  // How long joining, or one all-reduce, may wait for the neighbours.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

class TcpRing {
 public:
  // Joins member `index` of `size` (at least 2) to the ring `name`: listens on the
  // options' host, publishes its address in `store`, connects to member index + 1 and
  // accepts member index - 1. Blocks until both neighbours have joined.
  static StatusOr<std::unique_ptr<TcpRing>> Join(KvStore& store, const std::string& name, int index,
                                                 int size, const TcpRingOptions& options);
  ~TcpRing();
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  // Reduces `data` in place over the members. Every member calls it with the same count
  // and op, in the same order; a member that does not is named in the error.
  Status AllReduce(float* data, int64_t count, ReduceOp op);

 private:
  // What precedes every message: the sender's place in the sequence of all-reduces, so a
  // member out of step is an error rather than wrong sums.
  struct Header {
    uint64_t sequence = 0;
    int64_t count = 0;
    int32_t op = 0;
    int32_t step = 0;
  };

  TcpRing(std::string name, int index, int size, int to_right, int from_left,
          std::chrono::milliseconds timeout);
  int right() const { return (index_ + 1) % size_; }
  int left() const { return (index_ + size_ - 1) % size_; }
  // Sends `out` to the right neighbour while receiving `in` from the left one (each after a
  // header); returns when both are done.
  Status Shift(const Header& header, const void* out, size_t out_bytes, void* in, size_t in_bytes);
  Status CheckHeader(const Header& mine, const Header& theirs) const;

  std::string name_;
  int index_, size_;
  int to_right_, from_left_;  // connected sockets, non-blocking
  std::chrono::milliseconds timeout_;
  uint64_t sequence_ = 0;
  std::vector<float> scratch_;  // a chunk received to be reduced
};

}  // namespace pw
