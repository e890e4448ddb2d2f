#include "cost_model/comm_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "cost_model/gpu_collectives.h"

namespace pw::cost {
namespace {

// Bytes each rank moves in a ring all-reduce, relative to the message: 2(n-1)/n.
double RingFactor(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0; }
// Latency steps of a ring all-reduce.
// Latencies of an all-reduce: the member-order all-reduce every transport runs
// (executor/comm/tcp_ring.h) takes two steps at any group size (an all-to-all of chunks,
// then an all-gather, each step's messages to every member at once).
double AllReduceSteps(int n) { return n > 1 ? 2.0 : 0; }

}  // namespace

const char* CommKindName(CommKind kind) {
  switch (kind) {
    case CommKind::kAllReduce:
      return "all_reduce";
    case CommKind::kSendRecv:
      return "send_recv";
    case CommKind::kAllGather:
      return "all_gather";
    case CommKind::kReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

const char* CollectiveAlgorithmName(CollectiveAlgorithm algorithm) {
  return algorithm == CollectiveAlgorithm::kNccl ? "nccl" : "member-order";
}

StatusOr<CollectiveAlgorithm> ParseCollectiveAlgorithm(const std::string& name) {
  if (name == "member-order") return CollectiveAlgorithm::kMemberOrder;
  if (name == "nccl") return CollectiveAlgorithm::kNccl;
  return InvalidArgument("unknown collective algorithm '", name,
                         "' (member-order: pipeweave's deterministic collectives; nccl: NCCL's "
                         "own ring and tree)");
}

GroupSpan SpanOf(const DeviceSpec& device, const std::vector<int>& ranks) {
  if (ranks.empty()) return {};
  const int per_node = device.ranks_per_node() > 0 ? device.ranks_per_node() : 1 << 30;
  std::map<int, int> members;  // node -> members there
  for (int r : ranks) ++members[r / per_node];
  GroupSpan span{static_cast<int>(members.size()), 0};
  for (const auto& [node, count] : members) span.per_node = std::max(span.per_node, count);
  return span;
}

CommFit FitCommSamples(const std::string& kind, int group_size,
                       const std::vector<CommSampleValue>& samples, int busy_cores) {
  CommFit fit;
  fit.set_kind(kind);
  fit.set_group_size(group_size);
  fit.set_busy_cores(busy_cores);
  auto value = [](const CommSampleValue& s) { return s.mean > 0 ? s.mean : s.median; };
  for (const CommSampleValue& s : samples) {
    auto* p = fit.add_samples();
    p->set_bytes(s.bytes);
    p->set_median(s.median);
    p->set_spread(s.spread);
    p->set_mean(value(s));
  }
  // Minimise sum ((alpha + beta x - t) / t)^2: weighted least squares with weight 1/t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const CommSampleValue& s : samples) {
    double t = value(s);
    if (t <= 0) continue;
    double w = 1.0 / (t * t);
    sw += w;
    sx += w * s.bytes;
    sy += w * t;
    sxx += w * s.bytes * s.bytes;
    sxy += w * s.bytes * t;
  }
  double alpha = 0, beta = 0;
  double det = sw * sxx - sx * sx;
  if (sw > 0 && std::abs(det) > 1e-30 * sw * sxx) {
    beta = (sw * sxy - sx * sy) / det;
    alpha = (sy - beta * sx) / sw;
  } else if (sw > 0) {
    alpha = sy / sw;  // one size only: a constant
  }
  if (beta < 0) {  // refit as a constant
    beta = 0;
    alpha = sw > 0 ? sy / sw : 0;
  }
  if (alpha < 0) {  // refit through the origin
    alpha = 0;
    beta = sxx > 0 ? sxy / sxx : 0;
  }
  double sq = 0;
  int n = 0;
  for (const CommSampleValue& s : samples) {
    double t = value(s);
    if (t <= 0) continue;
    double r = (alpha + beta * s.bytes - t) / t;
    sq += r * r;
    ++n;
  }
  fit.set_alpha(alpha);
  fit.set_beta(beta);
  fit.set_residual(n ? std::sqrt(sq / n) : 0);
  return fit;
}

namespace {

double SampleTime(const ::pipeweave::proto::CommSample& s) {
  return s.mean() > 0 ? s.mean() : s.median();
}

// A fit's straggle for collectives on compute streams and on communication streams; where
// one kind was not measured, the other stands for it.
double ComputeStreamStraggle(const CommFit& f) {
  return f.has_straggle() ? f.straggle() : f.comm_stream_straggle();
}
double CommStreamStraggle(const CommFit& f) {
  return f.has_comm_stream_straggle() ? f.comm_stream_straggle() : f.straggle();
}

// Time of `fit` for `bytes` over `group_size` ranks: its samples interpolated within their
// range when the fit is of that group size, else its alpha-beta line (scaled along the ring
// from the fit's group size).
double FitTime(const CommFit& fit, CommKind kind, double bytes, int group_size) {
  const ::pipeweave::proto::CommSample* lo = nullptr;
  const ::pipeweave::proto::CommSample* hi = nullptr;
  for (const auto& s : fit.samples()) {
    if (s.bytes() <= bytes && (!lo || s.bytes() > lo->bytes())) lo = &s;
    if (s.bytes() >= bytes && (!hi || s.bytes() < hi->bytes())) hi = &s;
  }
  if (lo && hi && fit.group_size() == group_size) {
    double t = hi->bytes() > lo->bytes() ? (bytes - lo->bytes()) / (hi->bytes() - lo->bytes()) : 0;
    return SampleTime(*lo) + t * (SampleTime(*hi) - SampleTime(*lo));
  }
  double alpha = fit.alpha(), beta = fit.beta();
  if (kind == CommKind::kAllReduce && fit.group_size() != group_size) {
    alpha *= AllReduceSteps(group_size) / AllReduceSteps(fit.group_size());
    beta *= RingFactor(group_size) / RingFactor(fit.group_size());
  }
  return alpha + beta * bytes;
}

}  // namespace

CommEstimate CommModel::Time(CommKind kind, double bytes, int group_size, GroupSpan span,
                             int busy_cores) const {
  if (group_size <= 1) return {0, false};
  // Measured fits of the kind when profiled; a half of the all-reduce (reduce-scatter,
  // all-gather) otherwise takes half its measured time: one of its two member-order steps.
  CommKind measured = kind;
  if (kind == CommKind::kAllGather || kind == CommKind::kReduceScatter) {
    const std::string half = CommKindName(kind);
    if (std::none_of(fits_.begin(), fits_.end(),
                     [&](const CommFit& f) { return f.kind() == half; }))
      measured = CommKind::kAllReduce;
  }
  const double share = measured == kind ? 1.0 : 0.5;
  const std::string name = CommKindName(measured);
  // The nearest measured group size, then the measured loads around `busy_cores`.
  int best_size = -1;
  for (const CommFit& f : fits_)
    if (f.kind() == name &&
        (best_size < 0 || std::abs(f.group_size() - group_size) < std::abs(best_size - group_size)))
      best_size = f.group_size();
  if (best_size > 0 && !span.inter_node()) {
    const CommFit* below = nullptr;
    const CommFit* above = nullptr;
    for (const CommFit& f : fits_) {
      if (f.kind() != name || f.group_size() != best_size) continue;
      if (f.busy_cores() <= busy_cores && (!below || f.busy_cores() > below->busy_cores()))
        below = &f;
      if (f.busy_cores() >= busy_cores && (!above || f.busy_cores() < above->busy_cores()))
        above = &f;
    }
    if (!below) below = above;
    if (!above) above = below;
    double lo = FitTime(*below, measured, bytes, group_size);
    double hi = FitTime(*above, measured, bytes, group_size);
    int span_cores = above->busy_cores() - below->busy_cores();
    double t =
        span_cores > 0 ? static_cast<double>(busy_cores - below->busy_cores()) / span_cores : 0;
    double cpu = below->cpu_per_op() + t * (above->cpu_per_op() - below->cpu_per_op());
    auto between = [&](double (*of)(const CommFit&)) {
      return of(*below) + t * (of(*above) - of(*below));
    };
    return {share * (lo + t * (hi - lo)), true, share * cpu, between(ComputeStreamStraggle),
            between(CommStreamStraggle)};
  }
  return {SpecTime(kind, bytes, group_size, span), false};
}

double CommModel::SpecTime(CommKind kind, double bytes, int group_size, GroupSpan span) const {
  const bool inter = span.inter_node();
  if (device_.collective_protocols().empty()) {
    double bw = inter ? device_.inter_node_bandwidth() : device_.intra_node_bandwidth();
    double lat = inter ? device_.inter_node_latency() : device_.intra_node_latency();
    if (bw <= 0) bw = 1e9;
    switch (kind) {
      case CommKind::kSendRecv:
        return lat + bytes / bw;
      case CommKind::kAllReduce:
        return AllReduceSteps(group_size) * lat + RingFactor(group_size) * bytes / bw;
      default:  // one of the all-reduce's two steps
        return lat + RingFactor(group_size) / 2 * bytes / bw;
    }
  }
  return GpuCollectiveTime(device_, algorithm_, kind, bytes, group_size, span);
}

}  // namespace pw::cost
