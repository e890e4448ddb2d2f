#include "executor/comm/tcp_link.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "executor/comm/tcp_socket.h"

namespace pw {
namespace {

using tcp::Clock;

// The first bytes on a link's connection, from the sender.
struct Hello {
  uint32_t magic = 0x70776c6b;  // "pwlk"
  uint32_t name_hash = 0;
};

uint32_t NameHash(const std::string& name) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return h;
}

// While a helper thread waits for room in the socket, it looks this often whether the
// link is being closed.
constexpr auto kStopCheck = std::chrono::milliseconds(100);

}  // namespace

StatusOr<std::unique_ptr<TcpLink>> TcpLink::Join(KvStore& store, const std::string& name,
                                                 bool sender, const TcpLinkOptions& options) {
  const auto deadline = Clock::now() + options.timeout;
  const std::string key = StrCat("link/", name);
  auto failed = [&](const Status& s) {
    return Unavailable("link '", name, "' (", sender ? "sender" : "receiver", "): ", s.message());
  };
  Hello hello;
  hello.name_hash = NameHash(name);
  tcp::Socket connection;
  if (sender) {
    auto address = store.Get(key, options.timeout);
    if (!address.ok()) return failed(address.status());
    auto connected = tcp::ConnectTo(*address, deadline);
    if (!connected.ok()) return failed(connected.status());
    connection = std::move(connected).value();
    if (Status s = tcp::WriteAll(connection.get(), &hello, sizeof(hello), deadline); !s.ok())
      return failed(s);
  } else {
    auto listening = tcp::Listen(options.hostname);
    if (!listening.ok()) return failed(listening.status());
    if (Status s = store.Set(key, listening->second); !s.ok()) return failed(s);
    auto accepted = tcp::AcceptBy(listening->first.get(), deadline);
    if (!accepted.ok()) return failed(accepted.status());
    if (accepted->get() < 0) return failed(Unavailable("the sender did not connect in time"));
    connection = std::move(accepted).value();
    Hello theirs;
    if (Status s = tcp::ReadAll(connection.get(), &theirs, sizeof(theirs), deadline); !s.ok())
      return failed(s);
    if (theirs.magic != hello.magic || theirs.name_hash != hello.name_hash)
      return failed(Unavailable("a peer that is not this link's sender connected"));
  }
  if (Status s = tcp::MakeNonBlockingNoDelay(connection.get()); !s.ok()) return failed(s);
  return std::unique_ptr<TcpLink>(new TcpLink(name, connection.release(), options.timeout));
}

TcpLink::TcpLink(std::string name, int fd, std::chrono::milliseconds timeout)
    : name_(std::move(name)), fd_(fd), timeout_(timeout) {}

TcpLink::~TcpLink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  queued_.notify_all();
  if (writer_.joinable()) writer_.join();
  ::close(fd_);
}

StatusOr<bool> TcpLink::WriteSome(Outgoing& out) {
  while (out.sent < out.size()) {
    iovec parts[2];
    int n = 0;
    if (out.sent < sizeof(Header))
      parts[n++] = {reinterpret_cast<char*>(&out.header) + out.sent, sizeof(Header) - out.sent};
    const size_t data_sent = out.sent > sizeof(Header) ? out.sent - sizeof(Header) : 0;
    if (out.header.bytes > data_sent)
      parts[n++] = {const_cast<char*>(out.data) + data_sent, out.header.bytes - data_sent};
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t written = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written > 0) {
      out.sent += static_cast<size_t>(written);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return false;
    } else if (errno != EINTR) {
      return Unavailable(tcp::Errno("send"));
    }
  }
  return true;
}

StatusOr<bool> TcpLink::Send(uint64_t tag, const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  PW_RETURN_IF_ERROR(error_);
  Outgoing out;
  out.header.tag = tag;
  out.header.bytes = bytes;
  out.data = static_cast<const char*>(data);
  // Straight into the socket unless earlier messages still wait for room (order).
  if (queue_.empty()) {
    PW_ASSIGN_OR_RETURN(bool done, WriteSome(out));
    if (done) return true;
  }
  queue_.push_back(out);
  if (!writer_.joinable()) writer_ = std::thread([this] { WriteQueued(); });
  queued_.notify_one();
  return false;
}

Status TcpLink::WriteFully(Outgoing& out) {
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    PW_ASSIGN_OR_RETURN(bool done, WriteSome(out));
    if (done) return OkStatus();
    if (stopping_) return Aborted("the link closed");
    if (Clock::now() >= deadline)
      return Unavailable("timed out after ", timeout_.count(), " ms waiting for the receiver");
    PW_RETURN_IF_ERROR(
        tcp::PollOne(fd_, POLLOUT, std::min(deadline, Clock::now() + kStopCheck)).status());
  }
}

void TcpLink::WriteQueued() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    // Send appends behind the front only, so the front stays put while it is written.
    Outgoing& out = queue_.front();
    lock.unlock();
    Status s = WriteFully(out);
    lock.lock();
    if (s.ok()) {
      queue_.pop_front();
    } else {
      if (error_.ok()) error_ = s;
      queue_.clear();
    }
    if (queue_.empty()) drained_.notify_all();
  }
}

Status TcpLink::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [&] { return queue_.empty(); });
  return error_;
}

Status TcpLink::Recv(uint64_t tag, void* data, size_t bytes) {
  auto check_size = [&](uint64_t sent) {
    return sent == bytes
               ? OkStatus()
               : InvalidArgument("message ", tag, " has ", sent, " bytes, ", bytes, " expected");
  };
  if (auto it = early_.find(tag); it != early_.end()) {
    std::vector<char> message = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) early_.erase(it);
    PW_RETURN_IF_ERROR(check_size(message.size()));
    std::memcpy(data, message.data(), bytes);
    return OkStatus();
  }
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    Header header;
    PW_RETURN_IF_ERROR(tcp::ReadAll(fd_, &header, sizeof(header), deadline));
    if (header.magic != Header().magic)
      return Internal("link '", name_, "': the connection is out of step (not a message header)");
    if (header.tag == tag) {
      PW_RETURN_IF_ERROR(check_size(header.bytes));
      return tcp::ReadAll(fd_, data, bytes, deadline);
    }
    std::vector<char> early(header.bytes);
    PW_RETURN_IF_ERROR(tcp::ReadAll(fd_, early.data(), early.size(), deadline));
    early_[header.tag].push_back(std::move(early));
  }
}

}  // namespace pw
