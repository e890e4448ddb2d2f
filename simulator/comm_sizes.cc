#include "simulator/comm_sizes.h"

#include <map>
#include <set>

namespace pw::cost {

CommSizes CommSizesOf(const SimGraph& graph, double op_overhead) {
  std::set<int> groups;
  std::set<int64_t> allreduce, p2p;
  std::map<int, double> compute;
  std::map<int, int> comms;
  double all_compute = 0;
  for (const SimInstr& in : graph.instrs) {
    switch (in.kind) {
      case InstrKind::kCompute:
        compute[in.rank] += in.seconds + op_overhead;
        all_compute += in.seconds + op_overhead;
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
  for (const auto& [rank, n] : comms) gap += compute[rank] / n;
  sizes.compute_gap = comms.empty() ? 0 : gap / comms.size();
  sizes.compute_seconds = all_compute;
  return sizes;
}

}  // namespace pw::cost
