#include "executor/comm/nccl_comm.h"

#include <nccl.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "executor/cuda/device_comm.h"
#include "ops/kernels/cuda/launch.h"
#include "ops/kernels/cuda/member_order_reduce.h"
#include "ops/kernels/group_members.h"

namespace pw {
namespace {

Status NcclStatus(ncclResult_t r, std::string_view what) {
  if (r == ncclSuccess) return OkStatus();
  std::string detail = ncclGetLastError(nullptr);
  return Unavailable(what, ": ", ncclGetErrorString(r), detail.empty() ? "" : " (" + detail + ")");
}

Status NcclCudaStatus(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return OkStatus();
  return Internal(what, ": ", cudaGetErrorString(e));
}

std::string Hex(const void* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    unsigned char b = static_cast<const unsigned char*>(data)[i];
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

bool Unhex(const std::string& text, void* data, size_t size) {
  if (text.size() != 2 * size) return false;
  auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < size; ++i) {
    int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    static_cast<unsigned char*>(data)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

std::string TagList(const std::vector<uint64_t>& tags) {
  std::string out;
  for (uint64_t t : tags) out += StrCat(out.empty() ? "" : ",", t);
  return out;
}

// One NCCL communicator and what this rank does with it.
struct Channel {
  std::vector<int> members;  // global ranks, in group order
  int index = 0;             // this rank's place in `members`
  StreamType stream = StreamType::kCompute;
  bool p2p = false;
  std::vector<uint64_t> tags;       // p2p: this rank's transfers in queue order
  std::vector<std::string> wheres;  // ... and what each one is, for errors
  ncclComm_t comm = nullptr;
};

// The channels of one rank, shared by its streams' comms.
class NcclPool {
 public:
  NcclPool(KvStore& store, const Mesh& mesh, int rank, NcclOptions options)
      : store_(store), layout_(mesh), rank_(rank), options_(options) {}

  ~NcclPool() {
    for (auto& [key, ch] : channels_)
      if (ch.comm) (void)ncclCommDestroy(ch.comm);
  }

  const RankLayout& layout() const { return layout_; }
  int rank() const { return rank_; }

  std::string CollectiveKey(StreamType stream, std::string_view group) const {
    return StrCat("coll/", StreamTypeName(stream), "/",
                  layout_.GroupName(std::string(group), rank_));
  }
  static std::string TransferKey(int from, int to) { return StrCat("p2p/", from, "-", to); }

  Status ExpectCollective(StreamType stream, std::string_view group) {
    std::vector<int> members = layout_.Group(std::string(group), rank_);
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    if (members.size() == 1) return OkStatus();
    std::lock_guard<std::mutex> lock(mu_);
    Channel& ch = channels_[CollectiveKey(stream, group)];
    if (ch.members.empty()) {
      ch.members = members;
      ch.index =
          static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
      ch.stream = stream;
    }
    return OkStatus();
  }

  Status ExpectTransfer(StreamType stream, int peer, bool send, uint64_t tag,
                        const std::string& where) {
    if (peer == rank_) return InvalidArgument(where, ": a rank cannot send to itself");
    if (peer < 0 || peer >= layout_.world_size())
      return InvalidArgument(where, ": peer rank ", peer, " is outside the world");
    int from = send ? rank_ : peer, to = send ? peer : rank_;
    std::lock_guard<std::mutex> lock(mu_);
    Channel& ch = channels_[TransferKey(from, to)];
    if (ch.members.empty()) {
      ch.members = {from, to};
      ch.index = send ? 0 : 1;
      ch.stream = stream;
      ch.p2p = true;
    } else if (ch.stream != stream) {
      return FailedPrecondition(where, ": transfers from rank ", from, " to rank ", to,
                                " are queued on two streams (", StreamTypeName(ch.stream), ", ",
                                StreamTypeName(stream), "); NCCL needs one");
    }
    ch.tags.push_back(tag);
    ch.wheres.push_back(where);
    return OkStatus();
  }

  // In key order on every rank: a rank blocked joining a communicator waits only for
  // ranks that have joined every communicator ordered before it, so all joins finish.
  Status Connect() {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return Aborted("NCCL communicators were aborted");
    for (auto& [key, ch] : channels_) {
      if (ch.comm) continue;
      Status s = ConnectChannel(key, ch);
      if (!s.ok()) return s.WithContext(StrCat("rank ", rank_, ": connecting ", key));
    }
    return OkStatus();
  }

  StatusOr<ncclComm_t> Comm(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return Aborted("NCCL communicators were aborted");
    auto it = channels_.find(key);
    if (it == channels_.end())
      return FailedPrecondition("NCCL communicator ", key, " was not declared while lowering");
    if (!it->second.comm) return FailedPrecondition("NCCL communicator ", key, " is not connected");
    return it->second.comm;
  }

  Status AsyncErrors(StreamType stream) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, ch] : channels_) {
      if (!ch.comm || ch.stream != stream) continue;
      ncclResult_t async = ncclSuccess;
      PW_RETURN_IF_ERROR(NcclStatus(ncclCommGetAsyncError(ch.comm, &async), key));
      if (async != ncclSuccess && async != ncclInProgress) return NcclStatus(async, key);
    }
    return OkStatus();
  }

  void Abort() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, ch] : channels_) {
      if (ch.comm) (void)ncclCommAbort(ch.comm);
      ch.comm = nullptr;
    }
    aborted_ = true;
  }

 private:
  Status ConnectChannel(const std::string& key, Channel& ch) {
    const std::string id_key = "nccl/" + key;
    ncclUniqueId id;
    if (ch.index == 0) {
      PW_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
      PW_RETURN_IF_ERROR(store_.Set(id_key, Hex(&id, sizeof(id))));
    } else {
      PW_ASSIGN_OR_RETURN(std::string text, store_.Get(id_key, options_.timeout));
      if (!Unhex(text, &id, sizeof(id))) return DataLoss("malformed NCCL id under ", id_key);
    }
    // Published before joining, so the peer can read it once both have joined.
    const char* mine = ch.index == 0 ? "/send" : "/recv";
    const char* theirs = ch.index == 0 ? "/recv" : "/send";
    if (ch.p2p) PW_RETURN_IF_ERROR(store_.Set(id_key + mine, TagList(ch.tags)));
    PW_RETURN_IF_ERROR(
        NcclStatus(ncclCommInitRank(&ch.comm, static_cast<int>(ch.members.size()), id, ch.index),
                   "ncclCommInitRank"));
    if (!ch.p2p) return OkStatus();
    PW_ASSIGN_OR_RETURN(std::string other, store_.Get(id_key + theirs, options_.timeout));
    if (other == TagList(ch.tags)) return OkStatus();
    return FailedPrecondition(
        "ranks ", ch.members[0], " and ", ch.members[1],
        " queue their transfers in different orders, which NCCL (matching sends to receives "
        "in order, without tags) cannot run; first transfer here: ",
        ch.wheres.empty() ? std::string("none") : ch.wheres.front());
  }

  KvStore& store_;
  RankLayout layout_;
  int rank_;
  NcclOptions options_;
  std::mutex mu_;
  std::map<std::string, Channel> channels_;  // sorted: the order every rank connects in
  bool aborted_ = false;
};

class NcclStreamComm final : public cuda::DeviceComm {
 public:
  NcclStreamComm(std::shared_ptr<NcclPool> pool, StreamType stream)
      : pool_(std::move(pool)), stream_(stream) {}

  Status ExpectCollective(std::string_view group) override {
    return pool_->ExpectCollective(stream_, group);
  }
  Status ExpectTransfer(int peer, bool send, uint64_t tag, const std::string& where) override {
    return pool_->ExpectTransfer(stream_, peer, send, tag, where);
  }
  Status Connect() override { return pool_->Connect(); }
  void Abort() override { pool_->Abort(); }

  Status AllReduceSum(std::string_view group, float* data, int64_t count) override {
    return AllReduce(group, ncclSum, data, count);
  }
  Status AllReduceMax(std::string_view group, float* data, int64_t count) override {
    return AllReduce(group, ncclMax, data, count);
  }
  // NCCL sums bf16 and f16 natively: half the bytes of an f32 all-reduce.
  Status AllReduceSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                  int64_t count) override {
    return AllReduce(group, ncclSum, data, count,
                     dtype == DataType::kBFloat16 ? ncclBfloat16 : ncclFloat16);
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
    return ReduceScatter(group, data, count, ncclFloat32);
  }
  // Natively in bf16 / f16, as the all-reduce.
  Status ReduceScatterSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                      int64_t count) override {
    return ReduceScatter(group, data, count,
                         dtype == DataType::kBFloat16 ? ncclBfloat16 : ncclFloat16);
  }
  // NCCL's in-place all-gather: this member's chunk already sits at its place.
  Status AllGather(std::string_view group, void* data, int64_t bytes) override {
    std::vector<int> members = pool_->layout().Group(std::string(group), pool_->rank());
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    const int64_t n = static_cast<int64_t>(members.size());
    if (bytes % n != 0)
      return InvalidArgument("all-gather of ", bytes, " bytes over ", n, " members");
    if (n == 1 || bytes == 0) return OkStatus();
    PW_ASSIGN_OR_RETURN(ncclComm_t comm, pool_->Comm(pool_->CollectiveKey(stream_, group)));
    PW_ASSIGN_OR_RETURN(cudaStream_t stream, LaunchStream());
    char* d = static_cast<char*>(data);
    const size_t chunk = static_cast<size_t>(bytes / n);
    return NcclStatus(ncclAllGather(d + GroupRank(group) * chunk, d, chunk, ncclInt8, comm, stream),
                      StrCat("all-gather over group ", group));
  }
  // c_shift: one send to the member `offset` ahead and one receive from the member `offset`
  // behind, in one NCCL group so neither waits for the other.
  Status Shift(std::string_view group, int offset, const void* send, void* recv,
               int64_t bytes) override {
    std::vector<int> members = pool_->layout().Group(std::string(group), pool_->rank());
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    const int n = static_cast<int>(members.size());
    PW_ASSIGN_OR_RETURN(cudaStream_t stream, LaunchStream());
    const int me = GroupRank(group);
    const int to = ops::Member(me + offset, n), from = ops::Member(me - offset, n);
    if (to == me || bytes == 0)
      return send == recv || bytes == 0
                 ? OkStatus()
                 : NcclCudaStatus(cudaMemcpyAsync(recv, send, static_cast<size_t>(bytes),
                                                  cudaMemcpyDeviceToDevice, stream),
                                  "shift to itself");
    PW_ASSIGN_OR_RETURN(ncclComm_t comm, pool_->Comm(pool_->CollectiveKey(stream_, group)));
    const size_t count = static_cast<size_t>(bytes);
    Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart");
    if (s.ok()) s = NcclStatus(ncclSend(send, count, ncclInt8, to, comm, stream), "shift send");
    if (s.ok()) s = NcclStatus(ncclRecv(recv, count, ncclInt8, from, comm, stream), "shift recv");
    if (Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd"); s.ok()) s = end;
    return s.WithContext(StrCat("shift over group ", group));
  }
  // Two members: NCCL's reduce-scatter (one addition, which commutes); more: the first half
  // of the member-order all-reduce, so each chunk has that all-reduce's bits.
  Status ReduceScatter(std::string_view group, void* data, int64_t count, ncclDataType_t type) {
    std::vector<int> members = pool_->layout().Group(std::string(group), pool_->rank());
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    const int n = static_cast<int>(members.size());
    if (count % n != 0)
      return InvalidArgument("reduce-scatter of ", count, " values over ", n, " members");
    if (n == 1 || count == 0) return OkStatus();
    PW_ASSIGN_OR_RETURN(ncclComm_t comm, pool_->Comm(pool_->CollectiveKey(stream_, group)));
    PW_ASSIGN_OR_RETURN(cudaStream_t stream, LaunchStream());
    const int me = GroupRank(group);
    if (n > 2)
      return MemberOrderReduce(comm, n, me, ncclSum, data, count, type, stream, /*gather=*/false)
          .WithContext(StrCat("reduce-scatter over group ", group));
    const size_t elem = type == ncclFloat32 ? 4 : 2;
    char* d = static_cast<char*>(data);
    const size_t chunk = static_cast<size_t>(count / n);
    return NcclStatus(
        ncclReduceScatter(d, d + me * chunk * elem, chunk, type, ncclSum, comm, stream),
        StrCat("reduce-scatter over group ", group));
  }

  // Two members: NCCL's own all-reduce (one addition, which commutes). More: member order
  // (MemberOrderReduce), as the CPU transports sum, so that a buffer cut into pieces
  // reduces to the bits of the whole and every backend agrees.
  Status AllReduce(std::string_view group, ncclRedOp_t op, void* data, int64_t count,
                   ncclDataType_t type = ncclFloat32) {
    std::vector<int> members = pool_->layout().Group(std::string(group), pool_->rank());
    if (members.empty()) return InvalidArgument("unknown group '", group, "'");
    if (members.size() == 1 || count == 0) return OkStatus();
    PW_ASSIGN_OR_RETURN(ncclComm_t comm, pool_->Comm(pool_->CollectiveKey(stream_, group)));
    PW_ASSIGN_OR_RETURN(cudaStream_t stream, LaunchStream());
    if (members.size() > 2)
      return MemberOrderReduce(comm, static_cast<int>(members.size()), GroupRank(group), op, data,
                               count, type, stream, /*gather=*/true)
          .WithContext(StrCat("all-reduce over group ", group));
    return NcclStatus(ncclAllReduce(data, data, static_cast<size_t>(count), type, op, comm, stream),
                      StrCat("all-reduce over group ", group));
  }

  // Member c gathers every member's piece of chunk c (grouped sends and receives), sums them
  // in member order on the device, then every member gathers every chunk: the ring's bytes
  // in two steps. Without `gather`, a reduce-scatter: only this member's chunk is summed.
  static Status MemberOrderReduce(ncclComm_t comm, int n, int me, ncclRedOp_t op, void* data,
                                  int64_t count, ncclDataType_t type, cudaStream_t stream,
                                  bool gather) {
    const DataType dtype = type == ncclBfloat16  ? DataType::kBFloat16
                           : type == ncclFloat16 ? DataType::kFloat16
                                                 : DataType::kFloat32;
    const size_t elem = static_cast<size_t>(DataTypeSize(dtype));
    auto begin = [&](int c) { return count * c / n; };
    auto length = [&](int c) { return static_cast<size_t>(begin(c + 1) - begin(c)); };
    const size_t mine = length(me);
    char* d = static_cast<char*>(data);
    void* scratch = nullptr;
    PW_RETURN_IF_ERROR(NcclCudaStatus(
        cudaMallocAsync(&scratch, std::max<size_t>(1, n * mine * elem), stream), "scratch"));
    char* slots = static_cast<char*>(scratch);
    Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart");
    for (int j = 0; j < n && s.ok(); ++j) {
      if (j == me) continue;
      s = NcclStatus(ncclSend(d + begin(j) * elem, length(j), type, j, comm, stream), "send");
      if (s.ok())
        s = NcclStatus(ncclRecv(slots + j * mine * elem, mine, type, j, comm, stream), "recv");
    }
    if (Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd"); s.ok()) s = end;
    if (s.ok())
      s = NcclCudaStatus(cudaMemcpyAsync(slots + me * mine * elem, d + begin(me) * elem,
                                         mine * elem, cudaMemcpyDeviceToDevice, stream),
                         "own piece");
    if (s.ok()) {
      ops::cuda::LaunchMemberOrderReduce(slots, n, static_cast<int64_t>(mine), d + begin(me) * elem,
                                         dtype, op == ncclMax, stream);
      s = NcclCudaStatus(cudaGetLastError(), "member-order reduce");
    }
    if (!gather) {
      (void)cudaFreeAsync(scratch, stream);
      return s;
    }
    if (s.ok()) s = NcclStatus(ncclGroupStart(), "ncclGroupStart");
    for (int j = 0; j < n && s.ok(); ++j) {
      if (j == me) continue;
      s = NcclStatus(ncclSend(d + begin(me) * elem, mine, type, j, comm, stream), "send");
      if (s.ok())
        s = NcclStatus(ncclRecv(d + begin(j) * elem, length(j), type, j, comm, stream), "recv");
    }
    if (s.ok()) s = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    (void)cudaFreeAsync(scratch, stream);
    return s;
  }

  // Within a pair's communicator the sender is member 0 and the receiver member 1.
  Status Send(int peer, uint64_t tag, const Tensor& tensor) override {
    PW_RETURN_IF_ERROR(OnDevice(tensor));
    PW_ASSIGN_OR_RETURN(ncclComm_t comm, pool_->Comm(NcclPool::TransferKey(pool_->rank(), peer)));
    PW_ASSIGN_OR_RETURN(cudaStream_t stream, LaunchStream());
    return NcclStatus(
        ncclSend(tensor.raw(), static_cast<size_t>(tensor.nbytes()), ncclInt8, 1, comm, stream),
        StrCat("send to rank ", peer));
  }

  Status Recv(int peer, uint64_t tag, Tensor& tensor) override {
    PW_RETURN_IF_ERROR(OnDevice(tensor));
    PW_ASSIGN_OR_RETURN(ncclComm_t comm, pool_->Comm(NcclPool::TransferKey(peer, pool_->rank())));
    PW_ASSIGN_OR_RETURN(cudaStream_t stream, LaunchStream());
    return NcclStatus(
        ncclRecv(tensor.raw(), static_cast<size_t>(tensor.nbytes()), ncclInt8, 0, comm, stream),
        StrCat("receive from rank ", peer));
  }

  // Transfers complete in stream order; what is left to report is an asynchronous error.
  Status Flush() override { return pool_->AsyncErrors(stream_); }

 private:
  static StatusOr<cudaStream_t> LaunchStream() {
    cudaStream_t stream = ops::cuda::CurrentLaunch().stream;
    if (!stream) return FailedPrecondition("NCCL transfer queued outside a CUDA launch");
    return stream;
  }
  static Status OnDevice(const Tensor& t) {
    if (t.device() != Device::kCuda) return InvalidArgument("NCCL transfers take device tensors");
    return OkStatus();
  }

  std::shared_ptr<NcclPool> pool_;
  StreamType stream_;
};

class NcclCommFactory final : public CommFactory {
 public:
  explicit NcclCommFactory(std::shared_ptr<NcclPool> pool) : pool_(std::move(pool)) {}
  StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) override {
    return std::unique_ptr<StreamComm>(std::make_unique<NcclStreamComm>(pool_, stream));
  }

 private:
  std::shared_ptr<NcclPool> pool_;
};

}  // namespace

StatusOr<std::unique_ptr<CommFactory>> MakeNcclCommFactory(KvStore& store, const Mesh& mesh,
                                                           int rank, NcclOptions options) {
  RankLayout layout(mesh);
  if (rank < 0 || rank >= layout.world_size())
    return InvalidArgument("rank ", rank, " is outside the mesh's world of ", layout.world_size());
  auto pool = std::make_shared<NcclPool>(store, mesh, rank, options);
  return std::unique_ptr<CommFactory>(std::make_unique<NcclCommFactory>(std::move(pool)));
}

}  // namespace pw
