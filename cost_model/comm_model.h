#pragma once
// Communication time per kind (all-reduce, reduce-scatter, all-gather, send/recv), group
// size, placement and load: measured (`pipeweave profile --comm`, at the sizes the module
// moves and a standard range), interpolated linearly between the measured sizes, and an
// alpha-beta fit (alpha + beta * bytes) beyond them; without measurements, from the
// DeviceSpec's links. On GPUs (a spec with collective_protocols) the spec path follows the
// message size and the topology: each of NCCL's protocols (LL, LL128, Simple) costs a
// latency per step over NVLink or the network plus the bytes at its share of the bus
// bandwidth, and the fastest is taken, as NCCL's tuner does; the bus bandwidth of a group
// spanning nodes is that of the NICs its members cross on (one per member of a node, up to
// the node's NICs), capped by NVLink. Two algorithms are priced: the member-order
// collectives pipeweave runs (an all-to-all of chunks, then an all-gather: two steps at
// any size, every member's chunk crossing the network on its own NIC) and NCCL's own ring
// and tree (what frameworks without deterministic sums run). Without protocols (the CPU
// spec): the member-order all-reduce's 2 latencies and the ring's 2(n-1)/n of the bytes.

#include <string>
#include <vector>

#include "cost_model/device_spec.h"
#include "cost_model/op_cost_table.h"
#include "ir/status.h"

namespace pw::cost {

enum class CommKind { kAllReduce, kSendRecv, kAllGather, kReduceScatter };
// "all_reduce", "send_recv", "all_gather", "reduce_scatter"
const char* CommKindName(CommKind kind);

// How a collective sums: in member order (pipeweave's transports: bit-identical whatever
// the buffer's cuts) or as NCCL's ring and tree do (pricing runs of other frameworks).
enum class CollectiveAlgorithm { kMemberOrder, kNccl };
// "member-order", "nccl"; parsing names the accepted values on error.
const char* CollectiveAlgorithmName(CollectiveAlgorithm algorithm);
StatusOr<CollectiveAlgorithm> ParseCollectiveAlgorithm(const std::string& name);

// Where a group's members sit: the nodes it spans and the most members it has on one.
struct GroupSpan {
  int nodes = 1;
  int per_node = 1;
  bool inter_node() const { return nodes > 1; }
  bool operator==(const GroupSpan&) const = default;
  // Two ranks, on one node or on two.
  static GroupSpan Pair(bool inter_node) { return {inter_node ? 2 : 1, inter_node ? 1 : 2}; }
};
GroupSpan SpanOf(const DeviceSpec& device, const std::vector<int>& ranks);

struct CommSampleValue {
  double bytes = 0;
  double median = 0;  // seconds
  double spread = 0;
  double mean = 0;  // what the fit and the interpolation use; 0: the median
};

// Least squares on relative error (small messages weigh as much as large ones), alpha and
// beta clamped at zero; the residual is the RMS relative error. `busy_cores`: cores other
// threads kept busy during the measurement.
CommFit FitCommSamples(const std::string& kind, int group_size,
                       const std::vector<CommSampleValue>& samples, int busy_cores = 0);

struct CommEstimate {
  double seconds = 0;
  bool from_fit = false;            // false: from the DeviceSpec's links
  double cpu = 0;                   // CPU seconds each member spends on it (CommFit.cpu_per_op)
  double straggle = 0;              // expected wait for a group's last member (CommFit.straggle)
  double comm_stream_straggle = 0;  // the same on a communication stream
};

class CommModel {
 public:
  CommModel() = default;
  CommModel(DeviceSpec device, std::vector<CommFit> fits)
      : device_(std::move(device)), fits_(std::move(fits)) {}

  // `bytes`: the whole buffer (an all-gather's output, a reduce-scatter's input). `span`:
  // where the group sits (a group spanning nodes uses the spec's network links; measured
  // fits are of one node). `busy_cores`: cores of the node other threads keep busy when it
  // starts; fits measured under that load are used (interpolated between the measured
  // loads). Groups of one are free.
  CommEstimate Time(CommKind kind, double bytes, int group_size, GroupSpan span,
                    int busy_cores = 0) const;

  const DeviceSpec& device() const { return device_; }
  const std::vector<CommFit>& fits() const { return fits_; }
  CollectiveAlgorithm algorithm() const { return algorithm_; }
  void set_algorithm(CollectiveAlgorithm algorithm) { algorithm_ = algorithm; }

 private:
  double SpecTime(CommKind kind, double bytes, int group_size, GroupSpan span) const;

  DeviceSpec device_;
  std::vector<CommFit> fits_;
  CollectiveAlgorithm algorithm_ = CollectiveAlgorithm::kMemberOrder;
};

}  // namespace pw::cost
