#pragma once
// Communication time per kind (all-reduce, send/recv), group size and load: measured
// (`pipeweave profile --comm`, at the sizes the module moves and a standard range),
// interpolated linearly between the measured sizes, and an alpha-beta fit
// (alpha + beta * bytes) beyond them; without measurements, from the DeviceSpec's links
// (the member-order all-reduce: 2 latencies, and the ring's 2(n-1)/n of the bytes over the
// link).

#include <string>
#include <vector>

#include "cost_model/device_spec.h"
#include "cost_model/op_cost_table.h"

namespace pw::cost {

// kAllGather and kReduceScatter are the all-reduce's two halves (sequence parallelism): each
// moves (n-1)/n of the whole buffer in one member-order step; `bytes` is the whole buffer's.
enum class CommKind { kAllReduce, kSendRecv, kAllGather, kReduceScatter };
// "all_reduce", "send_recv", "all_gather", "reduce_scatter"
const char* CommKindName(CommKind kind);

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
  bool from_fit = false;  // false: from the DeviceSpec's links
  double cpu = 0;         // CPU seconds each member spends on it (CommFit.cpu_per_op)
  double straggle = 0;    // expected wait for a group's last member (CommFit.straggle)
};

class CommModel {
 public:
  CommModel() = default;
  CommModel(DeviceSpec device, std::vector<CommFit> fits)
      : device_(std::move(device)), fits_(std::move(fits)) {}

  // `inter_node`: the group spans nodes (the spec's slower link). `busy_cores`: cores of the
  // node other threads keep busy when it starts; fits measured under that load are used
  // (interpolated between the measured loads). Groups of one are free.
  CommEstimate Time(CommKind kind, double bytes, int group_size, bool inter_node,
                    int busy_cores = 0) const;

  const DeviceSpec& device() const { return device_; }
  const std::vector<CommFit>& fits() const { return fits_; }

 private:
  DeviceSpec device_;
  std::vector<CommFit> fits_;
};

}  // namespace pw::cost
