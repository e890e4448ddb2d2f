#include "tools/gloo_comm_bench.h"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "executor/comm/file_store.h"
#include "executor/comm/gloo_comm.h"

namespace pw::tools {
namespace {

using Clock = std::chrono::steady_clock;
using Samples = std::vector<std::vector<double>>;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class GlooCommBenchmark final : public cost::CommBenchmark {
 public:
  StatusOr<Samples> Measure(cost::CommKind kind, int group_size, int ranks,
                            const std::vector<int64_t>& sizes, int busy_cores, int warmup,
                            int repeats) override {
    char pattern[] = "/tmp/pw-commbench-XXXXXX";
    if (!mkdtemp(pattern)) return Unavailable("cannot create a temporary directory for the store");
    const std::string dir = pattern;
    // The groups run side by side: mp groups (all-reduce) or pipeline pairs (send/recv).
    Mesh mesh;
    if (kind == cost::CommKind::kAllReduce) {
      mesh.mp = group_size;
      mesh.dp = std::max(1, ranks / group_size);
    } else {
      mesh.pp = 2;
      mesh.mp = std::max(1, ranks / 2);
    }
    const int n = mesh.world_size();
    std::vector<Status> status(n);
    Samples samples(sizes.size());
    // Threads that keep `busy_cores` cores computing, as other ranks do in a run.
    std::atomic<bool> stop{false};
    std::vector<std::thread> spinners;
    for (int b = 0; b < busy_cores; ++b) spinners.emplace_back([&stop] { Spin(stop); });
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        status[r] =
            RunRank(kind, mesh, r, dir, sizes, warmup, repeats, r == 0 ? &samples : nullptr);
      });
    for (std::thread& t : threads) t.join();
    stop = true;
    for (std::thread& t : spinners) t.join();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    for (const Status& s : status) PW_RETURN_IF_ERROR(s);
    return samples;
  }

 private:
  static void Spin(const std::atomic<bool>& stop) {
    volatile double x = 1.0;
    while (!stop.load(std::memory_order_relaxed))
      for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  }

  static Status RunRank(cost::CommKind kind, const Mesh& mesh, int rank, const std::string& dir,
                        const std::vector<int64_t>& sizes, int warmup, int repeats, Samples* out) {
    PW_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> store, OpenFileStore(dir));
    GlooOptions options;
    options.timeout = std::chrono::seconds(60);
    PW_ASSIGN_OR_RETURN(std::unique_ptr<CommFactory> factory,
                        MakeGlooCommFactory(*store, mesh, rank, options));
    if (kind == cost::CommKind::kAllReduce) {
      PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> comm, factory->Create(StreamType::kMpComm));
      float token = 0;
      for (size_t k = 0; k < sizes.size(); ++k) {
        Tensor t(DataType::kFloat32, {std::max<int64_t>(1, sizes[k] / 4)});
        for (int i = 0; i < warmup + repeats; ++i) {
          // A one-float all-reduce lines the ranks up, so rank 0 times the collective
          // rather than waiting for a late peer.
          PW_RETURN_IF_ERROR(comm->AllReduceSum("mp", &token, 1));
          auto start = Clock::now();
          PW_RETURN_IF_ERROR(comm->AllReduceSum("mp", t.f32(), t.numel()));
          if (out && i >= warmup) (*out)[k].push_back(Since(start));
        }
      }
      return OkStatus();
    }
    // Send/recv: ping-pong between pipeline ranks 0 and 1 of each pair; one way is half
    // the round trip.
    PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> send, factory->Create(StreamType::kPpSend));
    PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> recv, factory->Create(StreamType::kPpRecv));
    const bool first = rank < mesh.mp;
    const int peer = first ? rank + mesh.mp : rank - mesh.mp;
    uint64_t tag = 1;
    for (size_t k = 0; k < sizes.size(); ++k) {
      Tensor t(DataType::kFloat32, {std::max<int64_t>(1, sizes[k] / 4)});
      for (int i = 0; i < warmup + repeats; ++i, tag += 2) {
        auto start = Clock::now();
        if (first) {
          PW_RETURN_IF_ERROR(send->Send(peer, tag, t));
          PW_RETURN_IF_ERROR(recv->Recv(peer, tag + 1, t));
        } else {
          PW_RETURN_IF_ERROR(recv->Recv(peer, tag, t));
          PW_RETURN_IF_ERROR(send->Send(peer, tag + 1, t));
        }
        PW_RETURN_IF_ERROR(send->Flush());
        if (out && i >= warmup) (*out)[k].push_back(Since(start) / 2);
      }
    }
    return OkStatus();
  }
};

}  // namespace

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark() {
  return std::make_unique<GlooCommBenchmark>();
}

}  // namespace pw::tools
