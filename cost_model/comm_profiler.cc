#include "cost_model/comm_profiler.h"

#include <algorithm>
#include <map>
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

StatusOr<CommFit> MeasureAndFit(CommBenchmark& bench, CommKind kind, int group,
                                const CommProfileOptions& o) {
  if (o.progress) o.progress(StrCat(CommKindName(kind), " over ", group, " ranks"));
  CommRun run;
  run.kind = kind;
  run.group_size = group;
  run.sizes =
      Union(o.sizes, kind == CommKind::kAllReduce ? o.extra_allreduce_sizes : o.extra_p2p_sizes);
  // Every group (or pair) of the run's ranks communicates at once.
  run.ranks = std::max(group, o.ranks - o.ranks % group);
  run.compute_gap = o.compute_gap;
  run.warmup = o.warmup;
  run.repeats = o.repeats;
  run.seconds = o.seconds;
  PW_ASSIGN_OR_RETURN(CommRunResult result, bench.Measure(run));
  if (result.seconds.size() != run.sizes.size())
    return Internal("comm benchmark returned ", result.seconds.size(), " sizes, asked for ",
                    run.sizes.size());
  std::vector<CommSampleValue> samples;
  for (size_t k = 0; k < run.sizes.size(); ++k) {
    const std::vector<double>& t = result.seconds[k];
    if (t.empty()) return Internal("comm benchmark measured nothing at ", run.sizes[k], " bytes");
    SampleStats st = Summarize(t);
    double mean = 0;
    for (double x : t) mean += x;
    samples.push_back({static_cast<double>(run.sizes[k]), st.median, st.spread, mean / t.size()});
  }
  CommFit fit = FitCommSamples(CommKindName(kind), group, samples);
  fit.set_ranks(run.ranks);
  fit.set_compute_gap(run.compute_gap);
  fit.set_cpu_per_op(std::max(0.0, result.cpu_per_op));
  fit.set_straggle(std::max(0.0, result.straggle));
  return fit;
}

}  // namespace

CommSizes CommSizesOf(const SimGraph& graph, double op_overhead) {
  std::set<int> groups;
  std::set<int64_t> allreduce, p2p;
  std::map<int, double> compute;
  std::map<int, int> comms;
  for (const SimInstr& in : graph.instrs) {
    switch (in.kind) {
      case InstrKind::kCompute:
        compute[in.rank] += in.seconds + op_overhead;
        break;
      case InstrKind::kCollective:
        groups.insert(in.group_size);
        allreduce.insert(static_cast<int64_t>(in.bytes));
        ++comms[in.rank];
        break;
      case InstrKind::kSend:
        p2p.insert(static_cast<int64_t>(in.bytes));
        ++comms[in.rank];
        break;
      case InstrKind::kRecv:
        ++comms[in.rank];
        break;
    }
  }
  CommSizes sizes{{groups.begin(), groups.end()},
                  {allreduce.begin(), allreduce.end()},
                  {p2p.begin(), p2p.end()}};
  double gap = 0;
  int ranks = 0;
  for (const auto& [rank, n] : comms) {
    gap += compute[rank] / n;
    ++ranks;
  }
  sizes.compute_gap = ranks > 0 ? gap / ranks : 0;
  return sizes;
}

StatusOr<std::vector<CommFit>> ProfileComm(CommBenchmark& bench, const CommProfileOptions& o) {
  if (o.sizes.empty()) return InvalidArgument("comm profile needs at least one message size");
  if (o.compute_gap < 0) return InvalidArgument("compute gap must be >= 0, got ", o.compute_gap);
  std::vector<CommFit> fits;
  for (int group : o.allreduce_groups) {
    if (group < 2) return InvalidArgument("all-reduce group size must be >= 2, got ", group);
    PW_ASSIGN_OR_RETURN(CommFit fit, MeasureAndFit(bench, CommKind::kAllReduce, group, o));
    fits.push_back(std::move(fit));
  }
  PW_ASSIGN_OR_RETURN(CommFit p2p, MeasureAndFit(bench, CommKind::kSendRecv, 2, o));
  fits.push_back(std::move(p2p));
  return fits;
}

}  // namespace pw::cost
