#include "cost_model/comm_profiler.h"

#include <algorithm>
#include <set>

#include "cost_model/profiler.h"

namespace pw::cost {
namespace {

std::vector<int64_t> Union(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

StatusOr<CommFit> MeasureAndFit(CommBenchmark& bench, CommKind kind, int group, int busy,
                                const CommProfileOptions& o) {
  if (o.progress)
    o.progress(StrCat(CommKindName(kind), " over ", group, " ranks, ", busy, " busy cores"));
  const std::vector<int64_t> sizes =
      Union(o.sizes, kind == CommKind::kAllReduce ? o.extra_allreduce_sizes : o.extra_p2p_sizes);
  // Every group (or pair) of the run's ranks communicates at once.
  const int ranks = std::max(group, o.ranks - o.ranks % group);
  PW_ASSIGN_OR_RETURN(std::vector<std::vector<double>> runs,
                      bench.Measure(kind, group, ranks, sizes, busy, o.warmup, o.repeats));
  if (runs.size() != sizes.size())
    return Internal("comm benchmark returned ", runs.size(), " sizes, asked for ", sizes.size());
  std::vector<CommSampleValue> samples;
  for (size_t k = 0; k < sizes.size(); ++k) {
    SampleStats st = Summarize(runs[k]);
    double mean = 0;
    for (double t : runs[k]) mean += t;
    mean = runs[k].empty() ? 0 : mean / runs[k].size();
    samples.push_back({static_cast<double>(sizes[k]), st.median, st.spread, mean});
  }
  CommFit fit = FitCommSamples(CommKindName(kind), group, samples, busy);
  fit.set_ranks(ranks);
  return fit;
}

}  // namespace

CommSizes CommSizesOf(const SimGraph& graph) {
  std::set<int> groups;
  std::set<int64_t> allreduce, p2p;
  for (const SimInstr& in : graph.instrs) {
    if (in.kind == InstrKind::kCollective) {
      groups.insert(in.group_size);
      allreduce.insert(static_cast<int64_t>(in.bytes));
    } else if (in.kind == InstrKind::kSend) {
      p2p.insert(static_cast<int64_t>(in.bytes));
    }
  }
  return CommSizes{{groups.begin(), groups.end()},
                   {allreduce.begin(), allreduce.end()},
                   {p2p.begin(), p2p.end()}};
}

StatusOr<std::vector<CommFit>> ProfileComm(CommBenchmark& bench, const CommProfileOptions& o) {
  if (o.sizes.empty()) return InvalidArgument("comm profile needs at least one message size");
  std::vector<CommFit> fits;
  for (int busy : o.busy_cores) {
    if (busy < 0) return InvalidArgument("busy cores must be >= 0, got ", busy);
    for (int group : o.allreduce_groups) {
      if (group < 2) return InvalidArgument("all-reduce group size must be >= 2, got ", group);
      PW_ASSIGN_OR_RETURN(CommFit fit, MeasureAndFit(bench, CommKind::kAllReduce, group, busy, o));
      fits.push_back(std::move(fit));
    }
    PW_ASSIGN_OR_RETURN(CommFit p2p, MeasureAndFit(bench, CommKind::kSendRecv, 2, busy, o));
    fits.push_back(std::move(p2p));
  }
  return fits;
}

}  // namespace pw::cost
