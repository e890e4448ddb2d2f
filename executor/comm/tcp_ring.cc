#include "executor/comm/tcp_ring.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "executor/comm/tcp_socket.h"
#include "ops/kernels/cpu/vector_math.h"
#include "ops/kernels/group_members.h"

namespace pw {
namespace {

using tcp::Clock;
using tcp::RemainingMs;
using tcp::Socket;

// The first bytes on a connection: who connects, to which ring size, and what for.
struct Hello {
  uint32_t magic = 0x70777269;  // "pwri"
  int32_t index = 0;
  int32_t size = 0;
  int32_t mesh = 0;  // 0: the ring's connection to the right; 1: the member-order mesh's
};

// One direction of a Shift: a header, then a payload.
struct Transfer {
  iovec parts[2];
  size_t left;
  // Advances past `n` bytes done.
  void Advance(size_t n) {
    left -= n;
    for (iovec& v : parts) {
      size_t step = std::min(n, v.iov_len);
      v.iov_base = static_cast<char*>(v.iov_base) + step;
      v.iov_len -= step;
      n -= step;
    }
  }
  msghdr Message() {
    msghdr m{};
    m.msg_iov = parts[0].iov_len ? parts : parts + 1;
    m.msg_iovlen = parts[0].iov_len ? 2 : 1;
    return m;
  }
};

// dst[i] = lhs[i] op rhs[i]; the operand order is what keeps members' bits equal. Sums go
// through the kernels' vector add, which rounds exactly as the scalar a + b does.
void Reduce(ReduceOp op, float* dst, const float* lhs, const float* rhs, int64_t n) {
  if (op == ReduceOp::kSum) {
    ops::cpu::AddF32(lhs, rhs, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = rhs[i] > lhs[i] ? rhs[i] : lhs[i];
  }
}

}  // namespace

StatusOr<std::unique_ptr<TcpRing>> TcpRing::Join(KvStore& store, const std::string& name, int index,
                                                 int size, const TcpRingOptions& options) {
  if (size < 2 || index < 0 || index >= size)
    return InvalidArgument("ring '", name, "': member ", index, " of ", size);
  const auto deadline = Clock::now() + options.timeout;
  const auto key = [&](int member) { return StrCat("ring/", name, "/", member); };
  const int right = (index + 1) % size, left = (index + size - 1) % size;
  auto failed = [&](const Status& s) {
    return Unavailable("ring '", name, "' member ", index, ": ", s.message());
  };

  auto listening = tcp::Listen(options.hostname);
  if (!listening.ok()) return failed(listening.status());
  Socket listener = std::move(listening->first);
  if (Status s = store.Set(key(index), listening->second); !s.ok()) return failed(s);

  auto address = store.Get(key(right), options.timeout);
  if (!address.ok()) return failed(address.status());
  auto to_right = tcp::ConnectTo(*address, deadline);
  if (!to_right.ok()) return failed(to_right.status());
  Hello hello;
  hello.index = index;
  hello.size = size;
  if (Status s = tcp::WriteAll(to_right->get(), &hello, sizeof(hello), deadline); !s.ok())
    return failed(s);

  // The mesh (member order, three or more members): a connection to every higher member;
  // the lower ones connect here.
  const bool mesh = options.member_order && size >= 3;
  std::vector<Socket> peers(static_cast<size_t>(size));
  if (mesh)
    for (int j = index + 1; j < size; ++j) {
      auto peer_address = store.Get(key(j), options.timeout);
      if (!peer_address.ok()) return failed(peer_address.status());
      auto to_peer = tcp::ConnectTo(*peer_address, deadline);
      if (!to_peer.ok()) return failed(to_peer.status());
      Hello mine = hello;
      mine.mesh = 1;
      if (Status s = tcp::WriteAll(to_peer->get(), &mine, sizeof(mine), deadline); !s.ok())
        return failed(s);
      peers[j] = std::move(to_peer).value();
    }

  // Accepts the left neighbour's ring connection and the lower members' mesh ones.
  Socket from_left;
  int expected = 1 + (mesh ? index : 0);
  while (expected > 0) {
    auto accepted = tcp::AcceptBy(listener.get(), deadline);
    if (!accepted.ok()) return failed(accepted.status());
    if (accepted->get() < 0)
      return failed(
          Unavailable(from_left.get() < 0 ? StrCat("member ", left) : std::string("a lower member"),
                      " did not connect in time"));
    Hello theirs;
    if (Status s = tcp::ReadAll(accepted->get(), &theirs, sizeof(theirs), deadline); !s.ok())
      return failed(s);
    const bool ring_left = theirs.mesh == 0 && theirs.index == left;
    const bool mesh_lower = mesh && theirs.mesh == 1 && theirs.index >= 0 && theirs.index < index &&
                            peers[theirs.index].get() < 0;
    if (theirs.magic != Hello().magic || theirs.size != size || !(ring_left || mesh_lower) ||
        (ring_left && from_left.get() >= 0))
      return failed(Unavailable("expected member ", left, " of ", size,
                                ", a peer introduced itself as ", theirs.index, " of ",
                                theirs.size));
    (ring_left ? from_left : peers[theirs.index]) = std::move(accepted).value();
    --expected;
  }
  std::vector<int> peer_fds(static_cast<size_t>(size), -1);
  for (int fd : {to_right->get(), from_left.get()})
    if (Status s = tcp::MakeNonBlockingNoDelay(fd); !s.ok()) return failed(s);
  for (int j = 0; j < size; ++j)
    if (peers[j].get() >= 0)
      if (Status s = tcp::MakeNonBlockingNoDelay(peers[j].get()); !s.ok()) return failed(s);
  for (int j = 0; j < size; ++j) peer_fds[j] = peers[j].release();
  return std::unique_ptr<TcpRing>(new TcpRing(name, index, size, to_right->release(),
                                              from_left.release(), std::move(peer_fds),
                                              options.timeout));
}

TcpRing::TcpRing(std::string name, int index, int size, int to_right, int from_left,
                 std::vector<int> peers, std::chrono::milliseconds timeout)
    : name_(std::move(name)),
      index_(index),
      size_(size),
      to_right_(to_right),
      from_left_(from_left),
      peers_(std::move(peers)),
      timeout_(timeout) {}

TcpRing::~TcpRing() {
  ::close(to_right_);
  ::close(from_left_);
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
}

Status TcpRing::CheckHeader(const Header& mine, const Header& theirs, int from) const {
  if (theirs.sequence == mine.sequence && theirs.count == mine.count && theirs.op == mine.op &&
      theirs.step == mine.step)
    return OkStatus();
  return Internal("ring '", name_, "': member ", from, " is out of step (all-reduce #",
                  theirs.sequence, " of ", theirs.count, " elements, op ", theirs.op, ", step ",
                  theirs.step, ") with member ", index_, " (#", mine.sequence, " of ", mine.count,
                  ", op ", mine.op, ", step ", mine.step, ")");
}

Status TcpRing::Shift(const Header& header, const void* out, size_t out_bytes, void* in,
                      size_t in_bytes) {
  Header received;
  Transfer send{
      {{const_cast<Header*>(&header), sizeof(Header)}, {const_cast<void*>(out), out_bytes}},
      sizeof(Header) + out_bytes};
  Transfer recv{{{&received, sizeof(Header)}, {in, in_bytes}}, sizeof(Header) + in_bytes};
  bool header_checked = false;
  const auto deadline = Clock::now() + timeout_;
  // Moves what each socket takes now; sleeps in poll() only when neither can progress.
  while (send.left > 0 || recv.left > 0) {
    bool progressed = false;
    if (send.left > 0) {
      msghdr m = send.Message();
      ssize_t n = ::sendmsg(to_right_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        send.Advance(static_cast<size_t>(n));
        progressed = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        return Unavailable("ring '", name_, "': sending to member ", right(),
                           " failed: ", std::strerror(errno));
      }
    }
    if (recv.left > 0) {
      msghdr m = recv.Message();
      ssize_t n = ::recvmsg(from_left_, &m, MSG_DONTWAIT);
      if (n > 0) {
        recv.Advance(static_cast<size_t>(n));
        progressed = true;
      } else if (n == 0) {
        return Unavailable("ring '", name_, "': member ", left(), " closed its connection");
      } else if (errno != EAGAIN && errno != EINTR) {
        return Unavailable("ring '", name_, "': receiving from member ", left(),
                           " failed: ", std::strerror(errno));
      }
      if (!header_checked && recv.parts[0].iov_len == 0) {
        PW_RETURN_IF_ERROR(CheckHeader(header, received, left()));
        header_checked = true;
      }
    }
    if (progressed) continue;
    pollfd fds[2];
    nfds_t n = 0;
    if (send.left > 0) fds[n++] = {to_right_, POLLOUT, 0};
    if (recv.left > 0) fds[n++] = {from_left_, POLLIN, 0};
    int ready = ::poll(fds, n, RemainingMs(deadline));
    if (ready < 0 && errno != EINTR)
      return Unavailable("ring '", name_, "': poll: ", std::strerror(errno));
    if (ready == 0)
      return Unavailable("ring '", name_, "': all-reduce #", header.sequence, " timed out after ",
                         timeout_.count(), " ms waiting for member ",
                         recv.left > 0 ? left() : right());
  }
  return OkStatus();
}

Status TcpRing::Exchange(const Header& header, const std::vector<Part>& out,
                         const std::vector<Part>& in) {
  struct Flow {
    int member;
    int fd;
    Transfer transfer;
    Header header;  // received: checked once its bytes are in
    bool checked = false;
  };
  std::vector<Flow> sends, recvs;
  sends.reserve(out.size());
  recvs.reserve(in.size());
  for (const Part& p : out)
    sends.push_back({p.member,
                     peers_[p.member],
                     {{{const_cast<Header*>(&header), sizeof(Header)}, {p.data, p.bytes}},
                      sizeof(Header) + p.bytes},
                     {}});
  for (const Part& p : in) {
    recvs.push_back({p.member, peers_[p.member], {}, {}});
    Flow& f = recvs.back();
    f.transfer =
        Transfer{{{&f.header, sizeof(Header)}, {p.data, p.bytes}}, sizeof(Header) + p.bytes};
  }
  const auto deadline = Clock::now() + timeout_;
  std::vector<pollfd> fds;
  for (;;) {
    bool progressed = false, pending = false;
    for (Flow& f : sends) {
      if (f.transfer.left == 0) continue;
      msghdr m = f.transfer.Message();
      ssize_t n = ::sendmsg(f.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        f.transfer.Advance(static_cast<size_t>(n));
        progressed = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        return Unavailable("ring '", name_, "': sending to member ", f.member,
                           " failed: ", std::strerror(errno));
      }
      pending = pending || f.transfer.left > 0;
    }
    for (Flow& f : recvs) {
      if (f.transfer.left == 0) continue;
      msghdr m = f.transfer.Message();
      ssize_t n = ::recvmsg(f.fd, &m, MSG_DONTWAIT);
      if (n > 0) {
        f.transfer.Advance(static_cast<size_t>(n));
        progressed = true;
      } else if (n == 0) {
        return Unavailable("ring '", name_, "': member ", f.member, " closed its connection");
      } else if (errno != EAGAIN && errno != EINTR) {
        return Unavailable("ring '", name_, "': receiving from member ", f.member,
                           " failed: ", std::strerror(errno));
      }
      if (!f.checked && f.transfer.parts[0].iov_len == 0) {
        PW_RETURN_IF_ERROR(CheckHeader(header, f.header, f.member));
        f.checked = true;
      }
      pending = pending || f.transfer.left > 0;
    }
    if (!pending) return OkStatus();
    if (progressed) continue;
    fds.clear();
    for (const Flow& f : sends)
      if (f.transfer.left > 0) fds.push_back({f.fd, POLLOUT, 0});
    for (const Flow& f : recvs)
      if (f.transfer.left > 0) fds.push_back({f.fd, POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), RemainingMs(deadline));
    if (ready < 0 && errno != EINTR)
      return Unavailable("ring '", name_, "': poll: ", std::strerror(errno));
    if (ready == 0) {
      int late = -1;
      for (const Flow& f : recvs)
        if (f.transfer.left > 0 && late < 0) late = f.member;
      for (const Flow& f : sends)
        if (f.transfer.left > 0 && late < 0) late = f.member;
      return Unavailable("ring '", name_, "': all-reduce #", header.sequence, " timed out after ",
                         timeout_.count(), " ms waiting for member ", late);
    }
  }
}

Status TcpRing::AllReduce(float* data, int64_t count, ReduceOp op) {
  Header header;
  header.sequence = sequence_++;
  header.count = count;
  header.op = static_cast<int32_t>(op);
  if (count == 0) return OkStatus();
  if (size_ == 2) {
    // One exchange of the whole tensor; both members add member 0's value first.
    scratch_.resize(static_cast<size_t>(count));
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    PW_RETURN_IF_ERROR(Shift(header, data, bytes, scratch_.data(), bytes));
    if (index_ == 0)
      Reduce(op, data, data, scratch_.data(), count);
    else
      Reduce(op, data, scratch_.data(), data, count);
    return OkStatus();
  }
  return peers_.empty() || peers_[right()] < 0 ? RingAllReduce(header, data, count, op)
                                               : MemberOrderAllReduce(header, data, count, op);
}

// Chunk c (member c's) gathers every member's piece of it; member c sums them in member
// order, then everyone gets every chunk. Each member sends (n - 1) / n of the buffer in each
// of the two steps, as the ring does in its 2(n - 1).
Status TcpRing::MemberOrderAllReduce(Header header, float* data, int64_t count, ReduceOp op) {
  PW_RETURN_IF_ERROR(MemberOrderReduceScatter(header, data, count, op));
  return MeshAllGather(header, reinterpret_cast<char*>(data), count * int64_t{sizeof(float)},
                       /*step=*/1);
}

Status TcpRing::MemberOrderReduceScatter(Header header, float* data, int64_t count, ReduceOp op) {
  const int n = size_;
  auto begin = [&](int c) { return count * c / n; };
  auto length = [&](int c) { return begin(c + 1) - begin(c); };
  const int64_t mine = length(index_);
  scratch_.resize(static_cast<size_t>(mine * n));
  std::vector<Part> out, in;
  for (int j = 0; j < n; ++j) {
    if (j == index_) continue;
    out.push_back({j, data + begin(j), static_cast<size_t>(length(j)) * sizeof(float)});
    in.push_back({j, scratch_.data() + j * mine, static_cast<size_t>(mine) * sizeof(float)});
  }
  header.step = 0;
  PW_RETURN_IF_ERROR(Exchange(header, out, in));
  // ((x0 + x1) + x2) + ...: every member's piece in its slot (this member's own too),
  // summed into this member's chunk of `data` in member order.
  float* own = data + begin(index_);
  auto slot = [&](int j) { return scratch_.data() + j * mine; };
  std::copy(own, own + mine, slot(index_));
  std::copy(slot(0), slot(0) + mine, own);
  for (int j = 1; j < n; ++j) Reduce(op, own, own, slot(j), mine);
  return OkStatus();
}

// Chunks are cut at whole elements of 4 bytes when `bytes` is a float buffer's (the
// all-reduce's second half), so both halves agree on where chunk c lies.
Status TcpRing::MeshAllGather(Header header, char* data, int64_t bytes, int32_t step) {
  const int n = size_;
  const int64_t unit = header.op == kAllGatherOp ? 1 : int64_t{sizeof(float)};
  const int64_t units = bytes / unit;
  auto begin = [&](int c) { return units * c / n * unit; };
  auto length = [&](int c) { return static_cast<size_t>(begin(c + 1) - begin(c)); };
  std::vector<Part> out, in;
  for (int j = 0; j < n; ++j) {
    if (j == index_) continue;
    out.push_back({j, data + begin(index_), length(index_)});
    in.push_back({j, data + begin(j), length(j)});
  }
  header.step = step;
  return Exchange(header, out, in);
}

Status TcpRing::ReduceScatterSum(float* data, int64_t count) {
  if (count % size_ != 0)
    return InvalidArgument("ring '", name_, "': reduce-scatter of ", count, " values over ", size_,
                           " members (not a multiple)");
  Header header;
  header.sequence = sequence_++;
  header.count = count;
  header.op = kReduceScatterOp;
  if (count == 0) return OkStatus();
  if (size_ == 2) {
    // Each member sends the other's chunk and adds member 0's value first.
    const int64_t half = count / 2;
    scratch_.resize(static_cast<size_t>(half));
    float* own = data + index_ * half;
    const size_t bytes = static_cast<size_t>(half) * sizeof(float);
    PW_RETURN_IF_ERROR(Shift(header, data + (1 - index_) * half, bytes, scratch_.data(), bytes));
    if (index_ == 0)
      Reduce(ReduceOp::kSum, own, own, scratch_.data(), half);
    else
      Reduce(ReduceOp::kSum, own, scratch_.data(), own, half);
    return OkStatus();
  }
  if (peers_.empty() || peers_[right()] < 0)
    return RingAllReduce(header, data, count, ReduceOp::kSum);
  return MemberOrderReduceScatter(header, data, count, ReduceOp::kSum);
}

Status TcpRing::PointShift(int offset, const void* send, void* recv, int64_t bytes) {
  Header header;
  header.sequence = sequence_++;
  header.count = bytes;
  header.op = kShiftOp;
  header.step = offset;
  const int to = ops::Member(index_ + offset, size_);
  const int from = ops::Member(index_ - offset, size_);
  if (to == index_) {
    std::memcpy(recv, send, static_cast<size_t>(bytes));
    return OkStatus();
  }
  if (bytes == 0) return OkStatus();
  if (to == right() && from == left())
    return Shift(header, send, static_cast<size_t>(bytes), recv, static_cast<size_t>(bytes));
  if (peers_.empty() || peers_[to] < 0 || peers_[from] < 0)
    return FailedPrecondition("ring '", name_, "': a shift by ", offset,
                              " needs the mesh connections (member-order rings have them)");
  return Exchange(header, {{to, const_cast<void*>(send), static_cast<size_t>(bytes)}},
                  {{from, recv, static_cast<size_t>(bytes)}});
}

Status TcpRing::AllGather(void* data, int64_t bytes) {
  if (bytes % size_ != 0)
    return InvalidArgument("ring '", name_, "': all-gather of ", bytes, " bytes over ", size_,
                           " members (not a multiple)");
  Header header;
  header.sequence = sequence_++;
  header.count = bytes;
  header.op = kAllGatherOp;
  if (bytes == 0) return OkStatus();
  char* d = static_cast<char*>(data);
  const int64_t chunk = bytes / size_;
  if (size_ > 2 && !peers_.empty() && peers_[right()] >= 0)
    return MeshAllGather(header, d, bytes, /*step=*/0);
  // Two members, or the classic ring: n - 1 shifts, each passing on the chunk received last.
  for (int step = 0; step < size_ - 1; ++step) {
    const int out = (index_ - step + size_) % size_, in = (index_ - step - 1 + size_) % size_;
    header.step = step;
    PW_RETURN_IF_ERROR(Shift(header, d + out * chunk, static_cast<size_t>(chunk), d + in * chunk,
                             static_cast<size_t>(chunk)));
  }
  return OkStatus();
}

Status TcpRing::RingAllReduce(Header header, float* data, int64_t count, ReduceOp op) {
  // Reduce-scatter then all-gather, one chunk per member. Chunk c is reduced along the
  // ring starting at member c, so its order depends on where an element lies; after the
  // reduce-scatter member i holds chunk i + 1 whole and the all-gather copies it.
  const int n = size_;
  auto begin = [&](int c) { return count * c / n; };
  auto length = [&](int c) { return begin(c + 1) - begin(c); };
  auto chunk = [&](int c) { return ((c % n) + n) % n; };
  scratch_.resize(static_cast<size_t>((count + n - 1) / n));
  for (int step = 0; step < n - 1; ++step) {
    const int out = chunk(index_ - step), in = chunk(index_ - step - 1);
    header.step = step;
    PW_RETURN_IF_ERROR(Shift(header, data + begin(out), length(out) * sizeof(float),
                             scratch_.data(), length(in) * sizeof(float)));
    Reduce(op, data + begin(in), scratch_.data(), data + begin(in), length(in));
  }
  for (int step = 0; step < n - 1; ++step) {
    const int out = chunk(index_ + 1 - step), in = chunk(index_ - step);
    header.step = n - 1 + step;
    PW_RETURN_IF_ERROR(Shift(header, data + begin(out), length(out) * sizeof(float),
                             data + begin(in), length(in) * sizeof(float)));
  }
  return OkStatus();
}

}  // namespace pw
