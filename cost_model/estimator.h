#pragma once
// What one op costs on a device: an exact hit in the empirical table, else interpolation
// over the same op type's measured points, else the DeviceSpec's roofline. Every estimate
// says which path it took, so a report can show how much of a prediction rests on
// measurements. A measured point counts with its CPU time when the table has it (the work
// at full speed; the simulator shares the cores), else its mean run time (what a step
// pays), else its median.
//
// Interpolation orders the measured points of the op type by their roofline work on the
// table's device (the larger of FLOPs / peak and bytes / bandwidth, so FLOPs and bytes
// both count), and interpolates log(time) linearly in log(work) between the two points
// around the query; outside the measured range it extrapolates along the nearest segment
// with a slope clamped to [0, 1] (time grows at most linearly with work), up to
// kMaxExtrapolation times the largest point's work: past that the roofline prices it (a
// slope fitted on operands that stay in the caches says little of ones that do not; the
// reference runner's whole-gradient adds beside the executor's bias-sized ones). A point's work is
// measured against the peak of the dtype it computed in; points of the query's dtype are
// preferred when there are at least two, and among them those of its attribute variant.

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cost_model/comm_model.h"
#include "cost_model/device_spec.h"
#include "cost_model/op_cost_table.h"
#include "cost_model/op_signature.h"

namespace pw::cost {

enum class EstimatePath { kTable = 0, kInterpolated, kRoofline, kComm };
// How far past its largest measured point an op type's time is extrapolated.
inline constexpr double kMaxExtrapolation = 4.0;
inline constexpr int kNumEstimatePaths = 4;
const char* EstimatePathName(EstimatePath path);  // "table", "interpolated", ...

struct Estimate {
  double seconds = 0;
  EstimatePath path = EstimatePath::kRoofline;
};

// What the estimator prices a measured entry at: the op's work at full speed, its CPU time
// when measured, else what a step pays per run (the mean), else the median.
double MeasuredSeconds(const OpCostEntry& e);

class Estimator {
 public:
  // `device` prices the roofline and communication; `table` (may be empty) holds the
  // measurements. A table measured on another device is an error: its times do not
  // transfer.
  static StatusOr<std::shared_ptr<Estimator>> Create(DeviceSpec device, OpCostTable table);
  // `estimator` as it prices a plan of `schedule`: with the entries its table measured in
  // runs of that schedule in place of the default ones (OpCostTable::ForSchedule); itself
  // when the table keeps no schedule's entries apart.
  static std::shared_ptr<const Estimator> ForSchedule(std::shared_ptr<const Estimator> estimator,
                                                      const std::string& schedule);

  // The compute time of an op (communication ops: their local part; the simulator adds the
  // collective from comm()).
  Estimate OpTime(const OpSignature& sig) const;
  // Interpolation or roofline only (no exact hit), for tests and reports.
  bool Interpolate(const OpSignature& sig, double* seconds) const;
  double Roofline(const OpSignature& sig) const;

  const DeviceSpec& device() const { return device_; }
  const OpCostTable& table() const { return table_; }
  const CommModel& comm() const { return comm_; }
  // How collectives are priced (default: the member-order ones pipeweave's transports run).
  void set_collective_algorithm(CollectiveAlgorithm algorithm) { comm_.set_algorithm(algorithm); }

 private:
  Estimator(DeviceSpec device, OpCostTable table);
  double Work(double flops, double bytes, DataType dtype) const;

  DeviceSpec device_;
  // The device the table was measured on (its measured spec when it carries one): the
  // scale the work of table points is measured in.
  DeviceSpec table_device_;
  OpCostTable table_;
  CommModel comm_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Estimate> cache_;
};

}  // namespace pw::cost
