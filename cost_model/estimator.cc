#include "cost_model/estimator.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cost_model/kernel_model.h"

namespace pw::cost {
namespace {

// Device names that denote the same device ("h100" and "h100-sxm").
std::string CanonicalDevice(const std::string& name) {
  StatusOr<DeviceSpec> builtin = BuiltinDeviceSpec(name);
  return builtin.ok() ? builtin->name() : name;
}

struct Point {
  double work;
  double seconds;
};

// The dtype a measured point computed in (tables before dtypes were recorded: f32).
DataType EntryDtype(const OpCostEntry& e) {
  DataType dtype = DataType::kFloat32;
  if (!e.dtype().empty()) ParseDataType(e.dtype(), &dtype);
  return dtype;
}

// log-log interpolation along sorted points; see the header for the rules.
double InterpolateSorted(const std::vector<Point>& pts, double work) {
  if (pts.size() == 1) return pts[0].seconds * work / pts[0].work;
  auto slope = [](const Point& a, const Point& b) {
    double s = std::log(b.seconds / a.seconds) / std::log(b.work / a.work);
    return std::clamp(s, 0.0, 1.0);
  };
  if (work <= pts.front().work) {
    double s = slope(pts[0], pts[1]);
    return pts[0].seconds * std::pow(work / pts[0].work, s);
  }
  if (work >= pts.back().work) {
    const Point& a = pts[pts.size() - 2];
    const Point& b = pts.back();
    return b.seconds * std::pow(work / b.work, slope(a, b));
  }
  auto hi = std::lower_bound(pts.begin(), pts.end(), work,
                             [](const Point& p, double w) { return p.work < w; });
  const Point& b = *hi;
  const Point& a = *(hi - 1);
  double t = std::log(work / a.work) / std::log(b.work / a.work);
  return std::exp(std::log(a.seconds) + t * (std::log(b.seconds) - std::log(a.seconds)));
}

}  // namespace

double MeasuredSeconds(const OpCostEntry& e) {
  if (e.cpu() > 0) return e.cpu();
  return e.mean() > 0 ? e.mean() : e.median();
}

const char* EstimatePathName(EstimatePath path) {
  switch (path) {
    case EstimatePath::kTable:
      return "table";
    case EstimatePath::kInterpolated:
      return "interpolated";
    case EstimatePath::kRoofline:
      return "roofline";
    case EstimatePath::kComm:
      return "comm";
  }
  return "?";
}

StatusOr<std::shared_ptr<Estimator>> Estimator::Create(DeviceSpec device, OpCostTable table) {
  PW_RETURN_IF_ERROR(ValidateDeviceSpec(device));
  if (!table.device().empty() && table.size() > 0 &&
      CanonicalDevice(table.device()) != CanonicalDevice(device.name()))
    return InvalidArgument("the cost table was measured on device '", table.device(), "', not on '",
                           device.name(), "': profile on that device or simulate with --device ",
                           table.device());
  return std::shared_ptr<Estimator>(new Estimator(std::move(device), std::move(table)));
}

std::shared_ptr<const Estimator> Estimator::ForSchedule(std::shared_ptr<const Estimator> estimator,
                                                        const std::string& schedule) {
  const OpCostTable& table = estimator->table();
  if (table.proto().in_run_schedules_size() < 2 || !table.ProfiledInRunOf(schedule))
    return estimator;
  auto view =
      std::shared_ptr<Estimator>(new Estimator(estimator->device_, table.ForSchedule(schedule)));
  view->comm_.set_algorithm(estimator->comm_.algorithm());
  return view;
}

Estimator::Estimator(DeviceSpec device, OpCostTable table)
    : device_(std::move(device)), table_(std::move(table)) {
  // A measured CPU spec (peaks, bandwidth) replaces the built-in guess.
  if (table_.proto().has_device_spec() &&
      CanonicalDevice(table_.proto().device_spec().name()) == CanonicalDevice(device_.name())) {
    device_ = table_.proto().device_spec();
  }
  table_device_ = table_.proto().has_device_spec() ? table_.proto().device_spec() : device_;
  std::vector<CommFit> fits(table_.proto().comm().begin(), table_.proto().comm().end());
  comm_ = CommModel(device_, std::move(fits));
}

double Estimator::Work(double flops, double bytes, DataType dtype) const {
  double peak = PeakFlops(table_device_, dtype);
  double bw = table_device_.memory_bandwidth();
  return std::max(peak > 0 ? flops / peak : 0.0, bw > 0 ? bytes / bw : 0.0);
}

double Estimator::Roofline(const OpSignature& sig) const {
  if (device_.multiprocessors() > 0) return KernelTime(device_, sig);
  return RooflineTime(device_, sig.dtype, sig.flops, sig.bytes);
}

bool Estimator::Interpolate(const OpSignature& sig, double* seconds) const {
  // Each point's work is against its own dtype's peak, so points of every dtype share one
  // scale; points of the query's dtype (then also of its variant) are preferred.
  std::vector<Point> same_variant, same_dtype, all;
  for (const OpCostEntry* e : table_.EntriesOf(sig.op_type)) {
    const DataType dtype = EntryDtype(*e);
    double w = Work(e->flops(), e->bytes(), dtype);
    if (w <= 0 || MeasuredSeconds(*e) <= 0) continue;
    Point p{w, MeasuredSeconds(*e)};
    all.push_back(p);
    if (dtype != sig.dtype) continue;
    same_dtype.push_back(p);
    if (e->key().ends_with(")" + sig.variant)) same_variant.push_back(p);
  }
  std::vector<Point>& pts = same_variant.size() >= 2 ? same_variant
                            : same_dtype.size() >= 2 ? same_dtype
                                                     : all;
  double work = Work(sig.flops, sig.bytes, sig.dtype);
  if (pts.empty() || work <= 0) return false;
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.work < b.work; });
  if (work > kMaxExtrapolation * pts.back().work) return false;  // the roofline's
  // Points of equal work average into one.
  std::vector<Point> merged;
  for (const Point& p : pts) {
    if (!merged.empty() && merged.back().work == p.work) {
      merged.back().seconds = std::sqrt(merged.back().seconds * p.seconds);
    } else {
      merged.push_back(p);
    }
  }
  *seconds = std::max(device_.min_kernel_time(), InterpolateSorted(merged, work));
  return true;
}

Estimate Estimator::OpTime(const OpSignature& sig) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(sig.key);
    if (it != cache_.end()) return it->second;
  }
  Estimate est;
  double interpolated = 0;
  if (const OpCostEntry* e = table_.Find(sig.key)) {
    est = {MeasuredSeconds(*e), EstimatePath::kTable};
  } else if (Interpolate(sig, &interpolated)) {
    est = {interpolated, EstimatePath::kInterpolated};
  } else {
    est = {Roofline(sig), EstimatePath::kRoofline};
  }
  std::lock_guard<std::mutex> lock(mu_);
  cache_.emplace(sig.key, est);
  return est;
}

}  // namespace pw::cost
