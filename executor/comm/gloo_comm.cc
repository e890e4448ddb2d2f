#include "executor/comm/gloo_comm.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "executor/comm/gloo_module.h"
#include "executor/comm/tcp_link.h"
#include "executor/comm/tcp_ring.h"

namespace pw {
namespace {

// The keys of one Gloo context's rendezvous, under "ctx/NAME/" in the run's KvStore.
class PrefixedRendezvous final : public RendezvousStore {
 public:
  PrefixedRendezvous(KvStore& store, std::string prefix)
      : store_(store), prefix_(std::move(prefix)) {}
  Status Set(const std::string& key, const std::string& value) override {
    return store_.Set(prefix_ + key, value);
  }
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_.Get(prefix_ + key, timeout);
  }

 private:
  KvStore& store_;
  std::string prefix_;
};

std::string Members(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  return out.str();
}

// The contexts of one rank, shared by its streams.
class ContextPool {
 public:
  ContextPool(KvStore& store, const Mesh& mesh, int rank, GlooOptions options)
      : layout_(mesh), rank_(rank), options_(options), kv_(store) {}

  // Opens Gloo's TCP device where Gloo carries the transfers (else Gloo is not loaded).
  Status Init() {
    if (!gloo_transfers()) return OkStatus();
    PW_ASSIGN_OR_RETURN(const GlooModule* gloo, LoadGlooModule());
    StatusOr<std::unique_ptr<GlooDevice>> device = gloo->open_device(options_.hostname);
    if (!device.ok())
      return Unavailable("rank ", rank_, ": cannot open a TCP device on ", options_.hostname, ": ",
                         device.status().message());
    device_ = std::move(device).value();
    return OkStatus();
  }

  const RankLayout& layout() const { return layout_; }
  bool gloo_transfers() const { return options_.transfers == TransferTransport::kGloo; }
  int rank() const { return rank_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // The context of group `kind` ("mp", "dp", "pp") for `channel` (a stream name).
  std::string GroupContext(const std::string& kind, const std::string& channel) const {
    return StrCat(channel, "/", layout_.GroupName(kind, rank_));
  }
  // The context of the transfers from global rank `from` to `to`: the sender's pp_send
  // stream and the receiver's pp_recv stream, so that the two streams of a rank never share
  // a connection. The sender is member 0, the receiver member 1.
  static std::string TransferContext(int from, int to) { return StrCat("p2p/", from, "->", to); }

  enum class Channel { kRing, kLink, kGlooContext };
  // Notes a channel to connect in ConnectExpected: a ring for collectives, a link or a Gloo
  // context for transfers.
  void Expect(const std::string& name, std::vector<int> members, Channel channel) {
    std::lock_guard<std::mutex> lock(mu_);
    expected_.emplace(name, Expected{std::move(members), channel});
  }

  // Connects every expected context in name order: a total order all ranks share, so a
  // rank waiting in one context's rendezvous waits only for ranks that have connected
  // every context ordered before it.
  Status ConnectExpected() {
    std::map<std::string, Expected> expected;
    {
      std::lock_guard<std::mutex> lock(mu_);
      expected.swap(expected_);
    }
    for (const auto& [name, e] : expected) {
      switch (e.channel) {
        case Channel::kRing:
          PW_RETURN_IF_ERROR(Ring(name, e.members).status());
          break;
        case Channel::kLink:
          PW_RETURN_IF_ERROR(Link(name, e.members).status());
          break;
        case Channel::kGlooContext:
          PW_RETURN_IF_ERROR(Get(name, e.members).status());
          break;
      }
    }
    return OkStatus();
  }

  // The Gloo context `name` of `members` (global ranks, this one among them), connected on
  // first use when it was not expected.
  StatusOr<std::shared_ptr<GlooContext>> Get(const std::string& name,
                                             const std::vector<int>& members) {
    std::shared_ptr<Entry> entry = Find(name);
    std::lock_guard<std::mutex> lock(entry->mu);
    if (entry->context) return entry->context;
    PrefixedRendezvous rendezvous(kv_, "ctx/" + name + "/");
    StatusOr<std::shared_ptr<GlooContext>> context = device_->ConnectFullMesh(
        rendezvous, IndexIn(members), static_cast<int>(members.size()), options_.timeout);
    if (!context.ok())
      return Unavailable("rank ", rank_, ": cannot connect to ranks ", Members(members), " (", name,
                         "): ", context.status().message());
    entry->context = std::move(context).value();
    return entry->context;
  }

  // The collective ring `name` of `members`, joined on first use when it was not expected.
  // One stream uses it, from its own thread.
  StatusOr<TcpRing*> Ring(const std::string& name, const std::vector<int>& members) {
    return Joined(name, members, &Entry::ring, [&] {
      TcpRingOptions options;
      options.hostname = options_.hostname;
      options.timeout = options_.timeout;
      return TcpRing::Join(kv_, name, IndexIn(members), static_cast<int>(members.size()), options);
    });
  }

  // The transfer link `name` from members[0] to members[1], joined on first use when it
  // was not expected. The sender's pp_send stream and the receiver's pp_recv stream use it.
  StatusOr<TcpLink*> Link(const std::string& name, const std::vector<int>& members) {
    return Joined(name, members, &Entry::link, [&] {
      TcpLinkOptions options;
      options.hostname = options_.hostname;
      options.timeout = options_.timeout;
      return TcpLink::Join(kv_, name, /*sender=*/IndexIn(members) == 0, options);
    });
  }

 private:
  RankLayout layout_;
  int rank_;
  GlooOptions options_;
  std::unique_ptr<GlooDevice> device_;
  struct Entry {
    std::mutex mu;  // held while this context connects
    std::shared_ptr<GlooContext> context;
    std::unique_ptr<TcpRing> ring;
    std::unique_ptr<TcpLink> link;
  };
  struct Expected {
    std::vector<int> members;
    Channel channel;
  };

  // The entry of `name`, made when missing. The pool's lock only finds it: connecting
  // waits for the other members, and another stream of this rank must meanwhile reach its
  // own (already made) contexts, e.g. to post the send those members are waiting for.
  std::shared_ptr<Entry> Find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Entry>& e = contexts_[name];
    if (!e) e = std::make_shared<Entry>();
    return e;
  }
  // The channel `slot` of entry `name`, made by `join` the first time it is asked for.
  template <typename Channel, typename Join>
  StatusOr<Channel*> Joined(const std::string& name, const std::vector<int>& members,
                            std::unique_ptr<Channel> Entry::*slot, Join join) {
    std::shared_ptr<Entry> entry = Find(name);
    std::lock_guard<std::mutex> lock(entry->mu);
    std::unique_ptr<Channel>& channel = (*entry).*slot;
    if (channel) return channel.get();
    StatusOr<std::unique_ptr<Channel>> joined = join();
    if (!joined.ok())
      return Unavailable("rank ", rank_, ": cannot connect to ranks ", Members(members), ": ",
                         joined.status().message());
    channel = std::move(joined).value();
    return channel.get();
  }
  int IndexIn(const std::vector<int>& members) const {
    return static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  }

  KvStore& kv_;
  std::mutex mu_;  // guards the maps only
  std::map<std::string, std::shared_ptr<Entry>> contexts_;
  std::map<std::string, Expected> expected_;  // not yet connected by ConnectExpected
};

class GlooStreamComm final : public StreamComm {
 public:
  GlooStreamComm(std::shared_ptr<ContextPool> pool, StreamType stream)
      : pool_(std::move(pool)), stream_(stream) {}

  ~GlooStreamComm() override { (void)Flush(); }

  Status AllReduceSum(std::string_view group, float* data, int64_t count) override {
    return AllReduce(group, ReduceOp::kSum, data, count);
  }
  Status AllReduceMax(std::string_view group, float* data, int64_t count) override {
    return AllReduce(group, ReduceOp::kMax, data, count);
  }
  int GroupRank(std::string_view group) const override {
    std::vector<int> members = pool_->layout().Group(std::string(group), pool_->rank());
    return static_cast<int>(std::find(members.begin(), members.end(), pool_->rank()) -
                            members.begin());
  }

  int GroupSize(std::string_view group) const override {
    return static_cast<int>(pool_->layout().Group(std::string(group), pool_->rank()).size());
  }
  Status ReduceScatterSum(std::string_view group, float* data, int64_t count) override {
    return OnRing(group, "reduce-scatter", count,
                  [&](TcpRing& ring) { return ring.ReduceScatterSum(data, count); });
  }
  Status AllGather(std::string_view group, void* data, int64_t bytes) override {
    return OnRing(group, "all-gather", bytes,
                  [&](TcpRing& ring) { return ring.AllGather(data, bytes); });
  }
  // One message to the member `offset` places on and one from the member as far back.
  Status Shift(std::string_view group, int offset, const void* send, void* recv,
               int64_t bytes) override {
    const int n = GroupSize(group);
    if (n == 1) std::memcpy(recv, send, static_cast<size_t>(bytes));
    return OnRing(group, "shift", bytes * std::max(n, 1),
                  [&](TcpRing& ring) { return ring.PointShift(offset, send, recv, bytes); });
  }

  // Runs `body` on this stream's ring of `group` (nothing to do for a group of one or an
  // empty buffer; a size that does not cut in one chunk per member is refused anyway).
  template <typename Body>
  Status OnRing(std::string_view group, const char* what, int64_t size, Body body) {
    std::string kind(group);
    std::vector<int> members = pool_->layout().Group(kind, pool_->rank());
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    if (size % static_cast<int64_t>(members.size()) != 0)
      return InvalidArgument(what, " of ", size, " over ", members.size(),
                             " members (not a multiple)");
    if (members.size() == 1 || size == 0) return OkStatus();
    PW_ASSIGN_OR_RETURN(TcpRing * ring,
                        pool_->Ring(pool_->GroupContext(kind, StreamTypeName(stream_)), members));
    Status s = body(*ring);
    if (!s.ok())
      return Unavailable(what, " over ", kind, " group (ranks ", Members(members),
                         ") failed: ", s.message());
    return OkStatus();
  }

  Status AllReduce(std::string_view group, ReduceOp op, float* data, int64_t count) {
    std::string kind(group);
    std::vector<int> members = pool_->layout().Group(kind, pool_->rank());
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    if (members.size() == 1 || count == 0) return OkStatus();
    PW_ASSIGN_OR_RETURN(TcpRing * ring,
                        pool_->Ring(pool_->GroupContext(kind, StreamTypeName(stream_)), members));
    Status s = ring->AllReduce(data, count, op);
    if (!s.ok())
      return Unavailable("all-reduce over ", kind, " group (ranks ", Members(members),
                         ") failed: ", s.message());
    return OkStatus();
  }

  Status ExpectCollective(std::string_view group) override {
    std::string kind(group);
    std::vector<int> members = pool_->layout().Group(kind, pool_->rank());
    if (members.size() > 1)
      pool_->Expect(pool_->GroupContext(kind, StreamTypeName(stream_)), std::move(members),
                    ContextPool::Channel::kRing);
    return OkStatus();
  }
  Status ExpectTransfer(int peer, bool send, uint64_t, const std::string&) override {
    const int from = send ? pool_->rank() : peer, to = send ? peer : pool_->rank();
    pool_->Expect(
        ContextPool::TransferContext(from, to), {from, to},
        pool_->gloo_transfers() ? ContextPool::Channel::kGlooContext : ContextPool::Channel::kLink);
    return OkStatus();
  }
  Status Connect() override { return pool_->ConnectExpected(); }

  Status Send(int peer, uint64_t tag, const Tensor& tensor) override {
    const int me = pool_->rank();
    const std::string name = ContextPool::TransferContext(me, peer);
    if (!pool_->gloo_transfers()) {
      PW_ASSIGN_OR_RETURN(TcpLink * link, pool_->Link(name, {me, peer}));
      StatusOr<bool> written = link->Send(tag, tensor.raw(), tensor.nbytes());
      if (!written.ok())
        return Unavailable("send to rank ", peer, " failed: ", written.status().message());
      if (std::find(links_.begin(), links_.end(), Peer{link, peer}) == links_.end())
        links_.push_back(Peer{link, peer});
      if (!*written) queued_.push_back(tensor);  // the link writes it later
      return OkStatus();
    }
    PW_ASSIGN_OR_RETURN(auto context, pool_->Get(name, {me, peer}));
    const int peer_index = 1;
    StatusOr<std::unique_ptr<GlooPendingSend>> send =
        context->Send(tensor.raw(), tensor.nbytes(), peer_index, tag);
    if (!send.ok()) return Unavailable("send to rank ", peer, " failed: ", send.status().message());
    pending_.push_back(Pending{std::move(send).value(), tensor, peer});
    return OkStatus();
  }

  Status Recv(int peer, uint64_t tag, Tensor& tensor) override {
    const int me = pool_->rank();
    const std::string name = ContextPool::TransferContext(peer, me);
    Status s;
    if (!pool_->gloo_transfers()) {
      PW_ASSIGN_OR_RETURN(TcpLink * link, pool_->Link(name, {peer, me}));
      s = link->Recv(tag, tensor.raw(), tensor.nbytes());
    } else {
      PW_ASSIGN_OR_RETURN(auto context, pool_->Get(name, {peer, me}));
      const int peer_index = 0;
      s = context->Recv(tensor.raw(), tensor.nbytes(), peer_index, tag, pool_->timeout());
    }
    if (s.code() == StatusCode::kAborted)
      return Unavailable("receive from rank ", peer, " was aborted");
    if (!s.ok()) return Unavailable("receive from rank ", peer, " failed: ", s.message());
    return OkStatus();
  }

  Status Flush() override {
    Status first;
    auto note = [&](const Status& s, int peer) {
      if (s.ok() || !first.ok()) return;
      first = s.code() == StatusCode::kAborted
                  ? Unavailable("send to rank ", peer, " was aborted")
                  : Unavailable("send to rank ", peer, " failed: ", s.message());
    };
    for (const Peer& p : links_) note(p.link->Flush(), p.peer);
    queued_.clear();
    for (Pending& p : pending_) note(p.send->Wait(pool_->timeout()), p.peer);
    pending_.clear();
    return first;
  }

 private:
  struct Pending {
    std::unique_ptr<GlooPendingSend> send;
    Tensor keep_alive;  // the storage the send reads from
    int peer;
  };

  struct Peer {
    TcpLink* link;
    int peer;
    bool operator==(const Peer& o) const { return link == o.link; }
  };

  std::shared_ptr<ContextPool> pool_;
  StreamType stream_;
  std::vector<Pending> pending_;  // Gloo's sends, until waited for
  std::vector<Peer> links_;       // the links this stream has sent on
  std::vector<Tensor> queued_;    // what the links still write, until flushed
};

class GlooCommFactory final : public CommFactory {
 public:
  explicit GlooCommFactory(std::shared_ptr<ContextPool> pool) : pool_(std::move(pool)) {}
  StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) override {
    return std::unique_ptr<StreamComm>(std::make_unique<GlooStreamComm>(pool_, stream));
  }

 private:
  std::shared_ptr<ContextPool> pool_;
};

}  // namespace

StatusOr<std::unique_ptr<CommFactory>> MakeGlooCommFactory(KvStore& store, const Mesh& mesh,
                                                           int rank, GlooOptions options) {
  auto pool = std::make_shared<ContextPool>(store, mesh, rank, options);
  PW_RETURN_IF_ERROR(pool->Init());
  return std::unique_ptr<CommFactory>(std::make_unique<GlooCommFactory>(std::move(pool)));
}

}  // namespace pw
