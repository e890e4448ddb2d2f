#include "executor/comm/tcp_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>

namespace pw::tcp {
namespace {

StatusOr<addrinfo*> Resolve(const std::string& host, const char* port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  int rv = getaddrinfo(host.c_str(), port, &hints, &found);
  if (rv != 0 || !found)
    return Unavailable("cannot resolve '", host, "': ", rv ? gai_strerror(rv) : "no address");
  return found;
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return Unavailable(Errno("fcntl"));
  return OkStatus();
}

Status SetNoDelay(int fd) {
  int on = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) < 0)
    return Unavailable(Errno("setsockopt TCP_NODELAY"));
  return OkStatus();
}

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Errno(const char* what) { return StrCat(what, ": ", std::strerror(errno)); }

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

StatusOr<bool> PollOne(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, RemainingMs(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return Unavailable(Errno("poll"));
  }
}

StatusOr<std::pair<Socket, std::string>> Listen(const std::string& host) {
  PW_ASSIGN_OR_RETURN(addrinfo * ai, Resolve(host, "0", AI_PASSIVE));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> free_ai(ai, freeaddrinfo);
  Socket s(::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) return Unavailable(Errno("socket"));
  // Room for every member's connections at once (the ring's and the mesh's).
  if (::bind(s.get(), ai->ai_addr, ai->ai_addrlen) < 0 || ::listen(s.get(), 64) < 0)
    return Unavailable(Errno(StrCat("listen on ", host).c_str()));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&addr), &len) < 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return Unavailable(Errno("getsockname"));
  return std::make_pair(std::move(s), StrCat(h, " ", p));
}

StatusOr<Socket> ConnectTo(const std::string& address, Clock::time_point deadline) {
  std::istringstream in(address);
  std::string host, port;
  if (!(in >> host >> port)) return Unavailable("malformed address '", address, "'");
  PW_ASSIGN_OR_RETURN(addrinfo * ai, Resolve(host, port.c_str(), AI_NUMERICHOST | AI_NUMERICSERV));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> free_ai(ai, freeaddrinfo);
  Socket s(::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0) return Unavailable(Errno("socket"));
  if (::connect(s.get(), ai->ai_addr, ai->ai_addrlen) < 0) {
    if (errno != EINPROGRESS) return Unavailable(Errno(StrCat("connect to ", address).c_str()));
    PW_ASSIGN_OR_RETURN(bool ready, PollOne(s.get(), POLLOUT, deadline));
    int err = 0;
    socklen_t len = sizeof(err);
    if (!ready) return Unavailable("connect to ", address, " timed out");
    if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
      return Unavailable("connect to ", address, ": ", std::strerror(err ? err : errno));
  }
  return s;
}

Status WriteAll(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      PW_ASSIGN_OR_RETURN(bool ready, PollOne(fd, POLLOUT, deadline));
      if (!ready) return Unavailable("timed out writing");
    } else {
      return Unavailable(Errno("send"));
    }
  }
  return OkStatus();
}
Status ReadAll(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      return Unavailable("connection closed");
    } else if (errno == EAGAIN || errno == EINTR) {
      PW_ASSIGN_OR_RETURN(bool ready, PollOne(fd, POLLIN, deadline));
      if (!ready) return Unavailable("timed out reading");
    } else {
      return Unavailable(Errno("recv"));
    }
  }
  return OkStatus();
}

Status MakeNonBlockingNoDelay(int fd) {
  PW_RETURN_IF_ERROR(SetNoDelay(fd));
  return SetNonBlocking(fd);
}

StatusOr<Socket> AcceptBy(int listener, Clock::time_point deadline) {
  PW_ASSIGN_OR_RETURN(bool ready, PollOne(listener, POLLIN, deadline));
  if (!ready) return Socket();
  Socket accepted(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (accepted.get() < 0) return Unavailable(Errno("accept"));
  return accepted;
}

}  // namespace pw::tcp
