#pragma once
// Point-to-point transfers from one rank process to another over one TCP connection that
// the two streams using it drive themselves: the sender's pp_send stream writes, the
// receiver's pp_recv stream reads.
//
// Why not Gloo's pairs: a Gloo transfer is a handshake (the receiver's recv-ready message,
// then the data) carried by the network threads of both sides, and the caller takes the
// pair's lock against its own network thread. Where ranks share cores every one of those
// wake-ups waits for a core, and a caller preempted while it holds the lock stalls the
// transfer: in the 4-process plans on 2 cores, sends that return in 30 us took up to 5 ms.
// Here a message (a header and the bytes) goes into the socket when it is sent, where the
// kernel keeps it until the receiver's own thread reads it: nothing else wakes.
//
// A send never waits for its receiver: what the socket does not take at once is written by
// a helper thread, started the first time it is needed, so that a send stream is never held
// by a receiver that waits (through other ranks) for that stream's next send. The receiver
// reads the connection in the sender's order; a message for a tag it does not wait for yet
// is kept until it does.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/kv_store.h"
#include "ir/status.h"

namespace pw {

struct TcpLinkOptions {
  std::string hostname = "127.0.0.1";  // address the receiver listens on
  // How long joining, writing one message or waiting for one may take.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

class TcpLink {
 public:
  // Connects the two ends of link `name` through `store`: the receiver listens and
  // publishes its address, the sender connects. Blocks until both ends have joined.
  static StatusOr<std::unique_ptr<TcpLink>> Join(KvStore& store, const std::string& name,
                                                 bool sender, const TcpLinkOptions& options);
  ~TcpLink();
  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;

  // Sender: sends `bytes` at `data` as message `tag`. Returns true when the socket took all
  // of it; false when the rest is queued, and `data` must then stay valid until Flush.
  StatusOr<bool> Send(uint64_t tag, const void* data, size_t bytes);
  // Sender: waits until every message sent so far is in the socket; the first error of a
  // queued write, if any.
  Status Flush();
  // Receiver: receives message `tag` into `data`, which it must fill exactly.
  Status Recv(uint64_t tag, void* data, size_t bytes);

 private:
  struct Header {
    uint32_t magic = 0x7077746c;  // "pwtl"
    uint32_t reserved = 0;
    uint64_t tag = 0;
    uint64_t bytes = 0;
  };
  // A message on its way out: what of its header and bytes the socket took so far.
  struct Outgoing {
    Header header;
    const char* data = nullptr;
    size_t sent = 0;
    size_t size() const { return sizeof(Header) + header.bytes; }
  };

  TcpLink(std::string name, int fd, std::chrono::milliseconds timeout);
  // Writes what the socket takes now; whether the message is all out.
  StatusOr<bool> WriteSome(Outgoing& out);
  // The helper thread: writes queued messages in order, waiting for room.
  void WriteQueued();
  Status WriteFully(Outgoing& out);

  std::string name_;
  int fd_;
  std::chrono::milliseconds timeout_;

  // Sender.
  std::mutex mu_;
  std::condition_variable queued_, drained_;
  std::deque<Outgoing> queue_;  // the front is being written by the helper thread
  Status error_;                // the first failed write; every later send fails with it
  std::atomic<bool> stopping_{false};
  std::thread writer_;

  // Receiver (its one stream's thread only).
  std::map<uint64_t, std::deque<std::vector<char>>> early_;  // messages read before asked for
};

}  // namespace pw
