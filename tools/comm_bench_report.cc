#include "tools/comm_bench_report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include "ir/rank_layout.h"
#include "ir/stream_type.h"

namespace pw::tools {
namespace {

struct AllReduceSeen {
  int64_t bytes = 0;
  double arrived = 0, done = 0;
};

}  // namespace

StatusOr<cost::CommRunResult> PairCommReports(const Mesh& mesh,
                                              const std::vector<std::vector<std::string>>& lines) {
  const RankLayout layout(mesh);
  const int n = mesh.world_size();
  if (static_cast<int>(lines.size()) != n)
    return Internal("the measuring run: ", lines.size(), " ranks' reports for ", n, " ranks");
  cost::CommRunResult out;
  out.ranks = n;
  // (kind, stream, group kind, the group's first rank, seq) -> rank -> what it saw.
  std::map<std::tuple<char, std::string, std::string, int, int64_t>, std::map<int, AllReduceSeen>>
      collectives;
  // (sender, receiver, tag) -> each step's send posted, and receive (size, posted, done), in
  // order. A tag comes again every step.
  using Transfer = std::tuple<int, int, uint64_t>;
  std::map<Transfer, std::vector<double>> sends;
  std::map<Transfer, std::vector<std::tuple<int64_t, double, double>>> recvs;
  int reported = 0;
  std::vector<int> step_of_rank(n, 0);  // the "t" lines read so far, per rank
  for (int r = 0; r < n; ++r)
    for (const std::string& line : lines[r]) {
      std::istringstream in(line);
      std::string what;
      in >> what;
      if (what == "a" || what == "g" || what == "x") {
        std::string stream, group;
        int64_t seq = 0;
        AllReduceSeen seen;
        if (!(in >> stream >> group >> seq >> seen.bytes >> seen.arrived >> seen.done)) continue;
        std::vector<int> members = layout.Group(group, r);
        if (members.empty()) continue;
        collectives[{what[0], stream, group, members.front(), seq}][r] = seen;
      } else if (what == "s") {
        int peer = 0;
        uint64_t tag = 0;
        int64_t bytes = 0;
        double posted = 0;
        if (in >> peer >> tag >> bytes >> posted) sends[{r, peer, tag}].push_back(posted);
      } else if (what == "r") {
        int peer = 0;
        uint64_t tag = 0;
        int64_t bytes = 0;
        double posted = 0, done = 0;
        if (in >> peer >> tag >> bytes >> posted >> done)
          recvs[{peer, r, tag}].emplace_back(bytes, posted, done);
      } else if (what == "t") {
        double seconds = 0;
        if (!(in >> seconds)) continue;
        if (step_of_rank[r] == static_cast<int>(out.step_seconds.size()))
          out.step_seconds.push_back(0);
        double& step = out.step_seconds[step_of_rank[r]++];
        step = std::max(step, seconds);
      } else if (what == "w") {
        CaughtSpins c;
        if (in >> c.waits >> c.cpu_seconds >> c.shared_waits >> c.shared_cpu_seconds >>
            c.shared_seconds)
          out.caught.Add(c);
      } else if (what == "c") {
        double cpu = 0;
        int measured = 0;
        if (in >> cpu >> measured) {
          out.process_cpu += cpu;
          out.measured_steps = measured;
          ++reported;
        }
      }
    }
  if (reported < n) return Internal("the measuring run: a rank reported nothing");
  for (const auto& [key, seen] : collectives) {
    const std::vector<int> members = layout.Group(std::get<2>(key), std::get<3>(key));
    if (seen.size() != members.size()) continue;  // a member's op fell in its first step
    double last = 0, mean = 0, done = 0;
    for (const auto& [rank, s] : seen) {
      last = std::max(last, s.arrived);
      mean += s.arrived / seen.size();
      done += s.done / seen.size();
    }
    cost::MeasuredComm m;
    const char kind = std::get<0>(key);
    m.kind = kind == 'g'   ? cost::CommKind::kAllGather
             : kind == 'x' ? cost::CommKind::kReduceScatter
                           : cost::CommKind::kAllReduce;
    m.group_size = static_cast<int>(members.size());
    m.bytes = seen.begin()->second.bytes;
    m.seconds = std::max(0.0, done - last);
    m.straggle = last - mean;
    m.on_comm_stream = std::get<1>(key) != StreamTypeName(StreamType::kCompute);
    out.ops.push_back(m);
  }
  for (const auto& [key, received] : recvs) {
    auto sent = sends.find(key);
    if (sent == sends.end()) continue;
    // Paired from the last step back: every rank measured the run's last steps, while the
    // first measured step of one may have begun before its peer's.
    const std::vector<double>& posted_sends = sent->second;
    const size_t pairs = std::min(posted_sends.size(), received.size());
    for (size_t k = 1; k <= pairs; ++k) {
      const auto& [bytes, posted, done] = received[received.size() - k];
      cost::MeasuredComm m;
      m.kind = cost::CommKind::kSendRecv;
      m.bytes = bytes;
      m.seconds = std::max(0.0, done - std::max(posted, posted_sends[posted_sends.size() - k]));
      out.ops.push_back(m);
    }
  }
  return out;
}

}  // namespace pw::tools
