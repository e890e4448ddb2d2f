#include "cost_model/comm_profiler.h"

#include <algorithm>
#include <array>
#include <map>

#include "cost_model/profiler.h"

namespace pw::cost {

std::vector<CommFit> FitMeasuredComm(const CommRunResult& run, const CommProfileOptions& o) {
  // (kind, group size) -> bytes -> times; and the straggles of each kind and group size, on
  // compute streams [0] and on communication streams [1].
  std::map<std::pair<CommKind, int>, std::map<int64_t, std::vector<double>>> times;
  std::map<std::pair<CommKind, int>, std::array<std::vector<double>, 2>> straggles;
  int ops_per_rank = 0;  // operations a rank took part in, summed over ranks
  for (const MeasuredComm& m : run.ops) {
    // A group of one (an mp=1 module's all-reduces) moves nothing: no fit, and the simulator
    // refuses one for it.
    if (m.group_size < 2) continue;
    const auto key = std::make_pair(m.kind, m.group_size);
    times[key][m.bytes].push_back(m.seconds);
    if (m.kind == CommKind::kAllReduce) straggles[key][m.on_comm_stream].push_back(m.straggle);
    ops_per_rank += m.group_size;
  }
  // The waits caught spinning are priced apart (DeviceSpec.spin_cpu_share).
  const double beyond =
      run.process_cpu - run.caught.cpu_seconds - o.compute_seconds * run.measured_steps;
  const double cpu_per_op = ops_per_rank > 0 ? std::max(0.0, beyond) / ops_per_rank : 0;
  std::vector<CommFit> fits;
  for (const auto& [key, by_size] : times) {
    std::vector<CommSampleValue> samples;
    for (const auto& [bytes, t] : by_size) {
      SampleStats st = Summarize(t);
      double mean = 0;
      for (double x : t) mean += x;
      samples.push_back({static_cast<double>(bytes), st.median, st.spread, mean / t.size()});
    }
    CommFit fit = FitCommSamples(CommKindName(key.first), key.second, samples);
    fit.set_ranks(run.ranks);
    fit.set_compute_gap(o.compute_gap);
    fit.set_cpu_per_op(cpu_per_op);
    auto mean_of = [](const std::vector<double>& v) {
      double sum = 0;
      for (double s : v) sum += s;
      return sum / v.size();
    };
    if (!straggles[key][0].empty()) fit.set_straggle(mean_of(straggles[key][0]));
    if (!straggles[key][1].empty()) fit.set_comm_stream_straggle(mean_of(straggles[key][1]));
    fits.push_back(std::move(fit));
  }
  return fits;
}

StatusOr<CommProfile> ProfileComm(CommBenchmark& bench, const Module& plan,
                                  const CommProfileOptions& o) {
  if (o.steps < 2)
    return InvalidArgument("comm profile needs at least 2 steps (the first warms up), got ",
                           o.steps);
  if (o.compute_seconds < 0)
    return InvalidArgument("compute seconds must be >= 0, got ", o.compute_seconds);
  PW_ASSIGN_OR_RETURN(CommRunResult run, bench.Run(plan, o.steps));
  if (run.ops.empty())
    return FailedPrecondition("module '", plan.name, "' communicates nothing in its steps");
  CommProfile profile;
  profile.fits = FitMeasuredComm(run, o);
  if (!run.step_seconds.empty()) profile.step_seconds = Summarize(run.step_seconds).median;
  profile.caught = run.caught;
  return profile;
}

}  // namespace pw::cost
