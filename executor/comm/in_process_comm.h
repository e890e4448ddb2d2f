#pragma once
// Communication between ranks that are threads of one process: a hub holds mailboxes for
// point-to-point transfers and meeting points for collectives. It lets tests and an
// embedding run a whole pipeline-parallel plan in one process, with the same streams,
// tags and group rules as Gloo. Sums add contributions in group-rank order, so results
// do not depend on arrival order; maxima are order-free.

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "executor/comm/stream_comm.h"
#include "ir/rank_layout.h"

namespace pw {

class InProcessHub {
 public:
  explicit InProcessHub(const Mesh& mesh,
                        std::chrono::milliseconds timeout = std::chrono::seconds(120))
      : layout_(mesh), timeout_(timeout) {}

  // The comm factory of one rank; the hub must outlive it.
  std::unique_ptr<CommFactory> FactoryFor(int rank);
  // Wakes every waiter with an error (a rank failed; the others must not hang).
  void Abort(const std::string& reason);

 private:
  friend class InProcessComm;
  struct Round {
    int kind = -1;  // what the members do: ReduceOp's value, or a reduce-scatter or all-gather
    std::vector<std::vector<float>> parts;
    std::vector<std::vector<char>> chunks;  // an all-gather's
    int arrived = 0;
    int left = 0;
    std::vector<float> sum;
    bool done = false;
  };

  RankLayout layout_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, uint64_t>, std::vector<Tensor>> mail_;  // (from, to, tag)
  std::map<std::tuple<std::string, int, uint64_t>, Round> rounds_;      // (group, stream, seq)
  std::string abort_reason_;
};

}  // namespace pw
