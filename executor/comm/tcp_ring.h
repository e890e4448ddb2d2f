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
// Every member gets the same bits, run after run, and every element is summed in member
// order, member 0's value first ((x0 + x1) + x2 ...), whatever the element's place in the
// buffer and the buffer's length: so an all-reduce of a buffer cut in pieces gives the same
// bits as one of the whole (the overlap passes' row splits rely on it). Two members swap
// their buffers; three or more reduce-scatter by an all-to-all of chunks over a full mesh of
// connections (each member sums its chunk's contributions in member order), then
// all-gather: the ring's bandwidth in two steps instead of 2(n - 1). The classic ring
// (chunk c summed starting at member c) stays available for comparison.

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
  // Three or more members: sum in member order over a full mesh (false: the classic ring,
  // whose order depends on where an element lies in the buffer).
  bool member_order = true;
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
  // Reduce-scatter of `count` values (a multiple of the members): member i's chunk
  // (count / size values from data + i * count / size) becomes every member's chunk i
  // summed in member order, the bits of that chunk of AllReduce; the other chunks are left
  // as they were. Without the mesh (classic ring) it is the ring's all-reduce of the whole.
  Status ReduceScatterSum(float* data, int64_t count);
  // All-gather of `bytes` (a multiple of the members): member i's chunk is in place on
  // entry, every member's on return (a copy: no arithmetic).
  Status AllGather(void* data, int64_t bytes);
  // Sends `bytes` from `send` to the member `offset` places after this one and receives
  // into `recv` what the member `offset` places before it sends: one message each way, over
  // the mesh (or the ring's neighbours at offset +-1), not an all-gather.
  Status PointShift(int offset, const void* send, void* recv, int64_t bytes);

 private:
  // What precedes every message: the sender's place in the sequence of all-reduces, so a
  // member out of step is an error rather than wrong sums.
  struct Header {
    uint64_t sequence = 0;
    int64_t count = 0;
    int32_t op = 0;
    int32_t step = 0;
  };
  // Header ops beside ReduceOp's: a member that all-gathers while another reduces is out
  // of step.
  static constexpr int32_t kReduceScatterOp = 2;
  static constexpr int32_t kAllGatherOp = 3;
  static constexpr int32_t kShiftOp = 4;

  TcpRing(std::string name, int index, int size, int to_right, int from_left,
          std::vector<int> peers, std::chrono::milliseconds timeout);
  int right() const { return (index_ + 1) % size_; }
  int left() const { return (index_ + size_ - 1) % size_; }
  // Sends `out` to the right neighbour while receiving `in` from the left one (each after a
  // header); returns when both are done.
  Status Shift(const Header& header, const void* out, size_t out_bytes, void* in, size_t in_bytes);
  Status CheckHeader(const Header& mine, const Header& theirs, int from) const;
  // One message to each of `out` and from each of `in` (member, buffer, bytes), over the
  // mesh connections, each after a header; returns when all are done.
  struct Part {
    int member;
    void* data;
    size_t bytes;
  };
  Status Exchange(const Header& header, const std::vector<Part>& out, const std::vector<Part>& in);
  Status RingAllReduce(Header header, float* data, int64_t count, ReduceOp op);
  Status MemberOrderAllReduce(Header header, float* data, int64_t count, ReduceOp op);
  // The halves of the member-order all-reduce: member i sums chunk i (of `count` values cut
  // at count * c / size), then sends it to every member.
  Status MemberOrderReduceScatter(Header header, float* data, int64_t count, ReduceOp op);
  Status MeshAllGather(Header header, char* data, int64_t bytes, int32_t step);

  std::string name_;
  int index_, size_;
  int to_right_, from_left_;  // connected sockets, non-blocking
  std::vector<int> peers_;    // mesh: a connection to every other member (-1: self, none)
  std::chrono::milliseconds timeout_;
  uint64_t sequence_ = 0;
  std::vector<float> scratch_;  // chunks received to be reduced
};

}  // namespace pw
