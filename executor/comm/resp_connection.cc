#include "executor/comm/resp_connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace pw {
namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits until `fd` is ready for `events`; false on timeout.
StatusOr<bool> WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return Unavailable("poll: ", std::strerror(errno));
  }
}

// Connects one resolved address within the deadline.
StatusOr<int> ConnectOne(const addrinfo& a, Clock::time_point deadline) {
  int fd = socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return Unavailable("socket: ", std::strerror(errno));
  if (connect(fd, a.ai_addr, a.ai_addrlen) != 0 && errno != EINPROGRESS) {
    Status s = Unavailable(std::strerror(errno));
    close(fd);
    return s;
  }
  auto ready = WaitFor(fd, POLLOUT, deadline);
  int err = 0;
  socklen_t len = sizeof(err);
  if (ready.ok() && *ready) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (!ready.ok() || !*ready || err != 0) {
    Status s = !ready.ok() ? ready.status()
               : !*ready   ? Unavailable("no answer (timed out)")
                           : Unavailable(std::strerror(err));
    close(fd);
    return s;
  }
  int one = 1;  // small commands must not wait for more bytes (Nagle)
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<RespConnection>> RespConnection::Connect(
    const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return Unavailable("cannot resolve '", host, "': ", gai_strerror(rc));
  const auto deadline = Clock::now() + timeout;
  Status last = Unavailable("no address");
  for (addrinfo* a = found; a; a = a->ai_next) {
    auto fd = ConnectOne(*a, deadline);
    if (fd.ok()) {
      freeaddrinfo(found);
      return std::unique_ptr<RespConnection>(new RespConnection(*fd));
    }
    last = fd.status();
  }
  freeaddrinfo(found);
  return last;
}

RespConnection::~RespConnection() {
  if (fd_ >= 0) close(fd_);
}

Status RespConnection::WriteAll(const std::string& bytes, Clock::time_point deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      PW_ASSIGN_OR_RETURN(bool ready, WaitFor(fd_, POLLOUT, deadline));
      if (!ready) return Unavailable("sending a command timed out");
      continue;
    }
    return Unavailable("send: ", std::strerror(errno));
  }
  return OkStatus();
}

Status RespConnection::Fill(Clock::time_point deadline) {
  char chunk[16384];
  for (;;) {
    ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return OkStatus();
    }
    if (n == 0) return Unavailable("the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Unavailable("recv: ", std::strerror(errno));
    PW_ASSIGN_OR_RETURN(bool ready, WaitFor(fd_, POLLIN, deadline));
    if (!ready) return Unavailable("no reply (timed out)");
  }
}

StatusOr<std::optional<RespReply>> RespConnection::Parse(size_t& pos) const {
  size_t eol = buffer_.find("\r\n", pos);
  if (eol == std::string::npos) return std::optional<RespReply>();
  const char type = buffer_[pos];
  const std::string line = buffer_.substr(pos + 1, eol - pos - 1);
  int64_t number = 0;
  if (type == ':' || type == '$' || type == '*') {
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), number);
    if (ec != std::errc() || end != line.data() + line.size())
      return DataLoss("malformed reply line '", line, "'");
  }
  RespReply reply;
  size_t next = eol + 2;
  switch (type) {
    case '+':
      reply.kind = RespReply::Kind::kStatus;
      reply.text = line;
      break;
    case '-':
      reply.kind = RespReply::Kind::kError;
      reply.text = line;
      break;
    case ':':
      reply.kind = RespReply::Kind::kInteger;
      reply.integer = number;
      break;
    case '$':
      if (number < 0) {
        reply.kind = RespReply::Kind::kNil;
        break;
      }
      if (buffer_.size() < next + static_cast<size_t>(number) + 2)
        return std::optional<RespReply>();
      reply.kind = RespReply::Kind::kBulk;
      reply.text = buffer_.substr(next, static_cast<size_t>(number));
      next += static_cast<size_t>(number) + 2;
      break;
    case '*':
      if (number < 0) {
        reply.kind = RespReply::Kind::kNil;
        break;
      }
      reply.kind = RespReply::Kind::kArray;
      for (int64_t i = 0; i < number; ++i) {
        PW_ASSIGN_OR_RETURN(std::optional<RespReply> element, Parse(next));
        if (!element) return std::optional<RespReply>();
        reply.elements.push_back(std::move(*element));
      }
      break;
    default:
      return DataLoss("malformed reply (type byte ", static_cast<int>(type), ")");
  }
  pos = next;
  return std::optional<RespReply>(std::move(reply));
}

StatusOr<RespReply> RespConnection::ReadReply(Clock::time_point deadline) {
  for (;;) {
    size_t pos = 0;
    if (!buffer_.empty()) {
      PW_ASSIGN_OR_RETURN(std::optional<RespReply> reply, Parse(pos));
      if (reply) {
        buffer_.erase(0, pos);
        return std::move(*reply);
      }
    }
    PW_RETURN_IF_ERROR(Fill(deadline));
  }
}

StatusOr<RespReply> RespConnection::Command(const std::vector<std::string>& args,
                                            std::chrono::milliseconds timeout) {
  if (fd_ < 0) return Unavailable("the connection failed before");
  const auto deadline = Clock::now() + timeout;
  std::string out = StrCat("*", args.size(), "\r\n");
  for (const std::string& a : args) out += StrCat("$", a.size(), "\r\n", a, "\r\n");
  Status sent = WriteAll(out, deadline);
  StatusOr<RespReply> reply = sent.ok() ? ReadReply(deadline) : StatusOr<RespReply>(sent);
  if (!reply.ok()) {
    close(fd_);
    fd_ = -1;
  }
  return reply;
}

}  // namespace pw
