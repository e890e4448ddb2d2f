#include "executor/comm/in_process_comm.h"

#include <algorithm>
#include <cstring>

#include "ops/kernels/group_members.h"

namespace pw {

class InProcessComm final : public StreamComm {
 public:
  InProcessComm(InProcessHub& hub, int rank, StreamType stream)
      : hub_(hub), rank_(rank), stream_(stream) {}

  Status AllReduceSum(std::string_view group, float* data, int64_t count) override {
    return AllReduce(group, ReduceOp::kSum, data, count);
  }
  // The member-order sum of the whole buffer; the caller reads its own chunk of it.
  Status ReduceScatterSum(std::string_view group, float* data, int64_t count) override {
    int members = GroupSize(group);
    if (members > 0 && count % members != 0)
      return InvalidArgument("reduce-scatter of ", count, " values over ", members,
                             " members (not a multiple)");
    return Reduce(group, kReduceScatter, data, count);
  }
  int GroupSize(std::string_view group) const override {
    return static_cast<int>(hub_.layout_.Group(std::string(group), rank_).size());
  }
  Status AllGather(std::string_view group, void* data, int64_t bytes) override {
    const int n = GroupSize(group);
    if (n > 0 && bytes % n != 0)
      return InvalidArgument("all-gather of ", bytes, " bytes over ", n,
                             " members (not a multiple)");
    char* d = static_cast<char*>(data);
    const int64_t chunk = n > 0 ? bytes / n : 0;
    const int index = GroupRank(group);
    return ExchangeBlocks(group, kAllGather, d + index * chunk, chunk,
                          [&](int member, const std::vector<char>& block) {
                            if (member != index)
                              std::memcpy(d + member * chunk, block.data(), chunk);
                          });
  }
  // Only the block of the member `offset` places before this one is copied out.
  Status Shift(std::string_view group, int offset, const void* send, void* recv,
               int64_t bytes) override {
    const int n = GroupSize(group);
    const int from = n > 0 ? ops::Member(GroupRank(group) - offset, n) : 0;
    if (n == 1) std::memcpy(recv, send, static_cast<size_t>(bytes));
    return ExchangeBlocks(group, kShift, send, bytes,
                          [&](int member, const std::vector<char>& block) {
                            if (member == from) std::memcpy(recv, block.data(), bytes);
                          });
  }
  Status AllReduceMax(std::string_view group, float* data, int64_t count) override {
    return AllReduce(group, ReduceOp::kMax, data, count);
  }
  int GroupRank(std::string_view group) const override {
    std::vector<int> members = hub_.layout_.Group(std::string(group), rank_);
    return static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  }

  Status AllReduce(std::string_view group, ReduceOp op, float* data, int64_t count) {
    return Reduce(group, static_cast<int>(op), data, count);
  }

  // Round kinds beside ReduceOp's values.
  static constexpr int kReduceScatter = 2;
  static constexpr int kAllGather = 3;
  static constexpr int kShift = 4;

  // Every member of `group` deposits its `bytes` at `block`; once all have, `take(member,
  // its block)` runs for each member (under the hub's lock). A round of `kind` (all-gather
  // or shift); nothing to do for a group of one.
  template <typename Take>
  Status ExchangeBlocks(std::string_view group, int kind, const void* block, int64_t bytes,
                        Take take) {
    const char* what = kind == kShift ? "shift" : "all-gather";
    std::string name(group);
    std::vector<int> members = hub_.layout_.Group(name, rank_);
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    const int n = static_cast<int>(members.size());
    if (n == 1) return OkStatus();
    const int index =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    auto key =
        std::make_tuple(hub_.layout_.GroupName(name, rank_), StreamIndex(stream_), seq_[name]++);
    std::unique_lock<std::mutex> lock(hub_.mu_);
    InProcessHub::Round& round = hub_.rounds_[key];
    if (round.kind < 0) {
      round.chunks.resize(n);
      round.kind = kind;
    }
    if (round.kind != kind)
      return Internal("collective over '", group, "': ranks disagree on what it is");
    const char* b = static_cast<const char*>(block);
    round.chunks[index].assign(b, b + bytes);
    if (++round.arrived == n) {
      for (const auto& c : round.chunks)
        if (static_cast<int64_t>(c.size()) != bytes)
          return Internal(what, " over '", group, "': ranks disagree on the size");
      round.done = true;
      hub_.cv_.notify_all();
    }
    if (!hub_.cv_.wait_for(lock, hub_.timeout_,
                           [&] { return round.done || !hub_.abort_reason_.empty(); }))
      return Unavailable(what, " over '", group, "' timed out waiting for its group");
    if (!round.done) return Aborted(hub_.abort_reason_);
    for (int m = 0; m < n; ++m) take(m, round.chunks[m]);
    if (++round.left == n) hub_.rounds_.erase(key);
    return OkStatus();
  }

  // Every member's `data` summed (or maxed) in member order; `what` is a ReduceOp's value
  // or kReduceScatter (a sum).
  Status Reduce(std::string_view group, int what, float* data, int64_t count) {
    const ReduceOp op = what == static_cast<int>(ReduceOp::kMax) ? ReduceOp::kMax : ReduceOp::kSum;
    std::string kind(group);
    std::vector<int> members = hub_.layout_.Group(kind, rank_);
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    if (members.size() == 1) return OkStatus();
    int index =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    auto key =
        std::make_tuple(hub_.layout_.GroupName(kind, rank_), StreamIndex(stream_), seq_[kind]++);
    std::unique_lock<std::mutex> lock(hub_.mu_);
    InProcessHub::Round& round = hub_.rounds_[key];
    if (round.kind < 0) {
      round.parts.resize(members.size());
      round.kind = what;
    }
    if (round.kind != what)
      return Internal("collective over '", group, "': ranks disagree on what it is");
    round.parts[index].assign(data, data + count);
    if (++round.arrived == static_cast<int>(members.size())) {
      round.sum = round.parts[0];
      for (size_t m = 1; m < members.size(); ++m) {
        if (round.parts[m].size() != round.sum.size())
          return Internal("all-reduce over '", group, "': ranks disagree on the size");
        for (size_t i = 0; i < round.sum.size(); ++i)
          round.sum[i] = op == ReduceOp::kSum ? round.sum[i] + round.parts[m][i]
                                              : std::max(round.sum[i], round.parts[m][i]);
      }
      round.done = true;
      hub_.cv_.notify_all();
    }
    if (!hub_.cv_.wait_for(lock, hub_.timeout_,
                           [&] { return round.done || !hub_.abort_reason_.empty(); }))
      return Unavailable("all-reduce over '", group, "' timed out waiting for its group");
    if (!round.done) return Aborted(hub_.abort_reason_);
    std::memcpy(data, round.sum.data(), count * sizeof(float));
    if (++round.left == static_cast<int>(members.size())) hub_.rounds_.erase(key);
    return OkStatus();
  }

  Status Send(int peer, uint64_t tag, const Tensor& tensor) override {
    std::lock_guard<std::mutex> lock(hub_.mu_);
    hub_.mail_[{rank_, peer, tag}].push_back(tensor.Clone());
    hub_.cv_.notify_all();
    return OkStatus();
  }

  Status Recv(int peer, uint64_t tag, Tensor& tensor) override {
    std::unique_lock<std::mutex> lock(hub_.mu_);
    auto key = std::make_tuple(peer, rank_, tag);
    auto ready = [&] {
      auto it = hub_.mail_.find(key);
      return (it != hub_.mail_.end() && !it->second.empty()) || !hub_.abort_reason_.empty();
    };
    if (!hub_.cv_.wait_for(lock, hub_.timeout_, ready))
      return Unavailable("receive from rank ", peer, " timed out");
    auto it = hub_.mail_.find(key);
    if (it == hub_.mail_.end() || it->second.empty()) return Aborted(hub_.abort_reason_);
    Tensor message = std::move(it->second.front());
    it->second.erase(it->second.begin());
    if (it->second.empty()) hub_.mail_.erase(it);
    if (message.nbytes() != tensor.nbytes())
      return Internal("receive from rank ", peer, ": got ", message.nbytes(), " bytes, expected ",
                      tensor.nbytes());
    std::memcpy(tensor.raw(), message.raw(), tensor.nbytes());
    return OkStatus();
  }

  Status Flush() override { return OkStatus(); }

 private:
  InProcessHub& hub_;
  int rank_;
  StreamType stream_;
  std::map<std::string, uint64_t> seq_;  // collectives issued per group kind
};

namespace {
class InProcessFactory final : public CommFactory {
 public:
  InProcessFactory(InProcessHub& hub, int rank) : hub_(hub), rank_(rank) {}
  StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) override {
    return std::unique_ptr<StreamComm>(std::make_unique<InProcessComm>(hub_, rank_, stream));
  }

 private:
  InProcessHub& hub_;
  int rank_;
};
}  // namespace

std::unique_ptr<CommFactory> InProcessHub::FactoryFor(int rank) {
  return std::make_unique<InProcessFactory>(*this, rank);
}

void InProcessHub::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_reason_ = reason.empty() ? "aborted" : reason;
  cv_.notify_all();
}

}  // namespace pw
