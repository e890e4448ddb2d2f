#pragma once
// The TCP plumbing the rank processes' own transports share (tcp_ring.h for collectives,
// tcp_link.h for transfers): sockets that close themselves, listening and connecting with a
// deadline, and moving whole buffers over non-blocking sockets under poll().

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

#include "ir/status.h"

namespace pw::tcp {

using Clock = std::chrono::steady_clock;

// A socket closed when it goes out of scope unless released.
class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// "WHAT: strerror(errno)".
std::string Errno(const char* what);
// Milliseconds until `deadline` (0 when past), for poll().
int RemainingMs(Clock::time_point deadline);
// Waits for `events` on `fd` until `deadline`; false on timeout.
StatusOr<bool> PollOne(int fd, short events, Clock::time_point deadline);
// How every connection of these transports is used: non-blocking (driven under poll()),
// and small messages go out at once (no Nagle delay: the peer waits on each of them).
Status MakeNonBlockingNoDelay(int fd);
// A listening socket on `host` (any free port) and its address as "HOST PORT".
StatusOr<std::pair<Socket, std::string>> Listen(const std::string& host);
// A non-blocking connection to "HOST PORT".
StatusOr<Socket> ConnectTo(const std::string& address, Clock::time_point deadline);
// Accepts one connection on `listener`, made non-blocking; an empty Socket (get() < 0)
// when none came by `deadline`.
StatusOr<Socket> AcceptBy(int listener, Clock::time_point deadline);
// Moves all of `bytes` in one direction on a non-blocking socket, polling until `deadline`.
Status WriteAll(int fd, const void* data, size_t bytes, Clock::time_point deadline);
Status ReadAll(int fd, void* data, size_t bytes, Clock::time_point deadline);

}  // namespace pw::tcp
