#include "cost_model/gpu_collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pw::cost {
namespace {

using Protocol = ::pipeweave::proto::CollectiveProtocol;

// Where the bytes go: NVLink's bus bandwidth, one member's NIC, and the NICs a node's
// members of the group cross on together.
struct Links {
  double nvlink = 0;
  double nic = 0;
  double node_nics = 0;
};

Links LinksOf(const DeviceSpec& spec, GroupSpan span) {
  Links l;
  l.nvlink = spec.intra_node_bandwidth() * spec.collective_bus_efficiency();
  const double nic = spec.inter_node_bandwidth() * spec.network_efficiency();
  const int k = std::max(1, span.per_node);
  const int nics = spec.nics_per_node() > 0 ? spec.nics_per_node() : k;
  // Members beyond the node's NICs share them.
  l.nic = nic * std::min(1.0, static_cast<double>(nics) / k);
  l.node_nics = nic * std::min(k, nics);
  return l;
}

double Latency(const Protocol& p, double intra_steps, double inter_steps) {
  return p.base_latency() + intra_steps * p.intra_step_latency() +
         inter_steps * p.inter_step_latency();
}

// NCCL's ring (and, for all-reduces across nodes, its tree) under one protocol.
double NcclTime(const Protocol& p, const Links& l, CommKind kind, double bytes, int n,
                GroupSpan span) {
  const int m = std::max(1, span.nodes);
  const bool all_reduce = kind == CommKind::kAllReduce;
  const int phases = all_reduce ? 2 : 1;
  const double steps = phases * (n - 1.0), inter_steps = phases * (m - 1.0);
  const double bus = span.inter_node() ? std::min(l.nvlink, l.node_nics) : l.nvlink;
  const double moved = phases * (n - 1.0) / n * bytes;
  double ring =
      Latency(p, steps - inter_steps, inter_steps) + moved / (bus * p.bandwidth_fraction());
  if (!all_reduce || m < 2) return ring;
  const int k = std::max(1, span.per_node);
  double tree = Latency(p, 2.0 * (k - 1), 2.0 * std::log2(m)) +
                bytes / (0.5 * 0.9 * bus * p.bandwidth_fraction());
  return std::min(ring, tree);
}

// One all-to-all step of the member-order collectives: every member sends bytes/n to each
// other member, to those of its node over NVLink and to the others through its own NIC.
double MemberOrderStep(const Protocol& p, const Links& l, double bytes, int n, GroupSpan span) {
  const int k = std::min(n, std::max(1, span.per_node));
  const double local = (k - 1.0) / n * bytes / (l.nvlink * p.bandwidth_fraction());
  const double remote = span.inter_node() ? (n - k) / static_cast<double>(n) * bytes /
                                                (l.nic * p.bandwidth_fraction())
                                          : 0;
  return Latency(p, span.inter_node() ? 0 : 1, span.inter_node() ? 1 : 0) + std::max(local, remote);
}

double ProtocolTime(const DeviceSpec& spec, const Protocol& p, CollectiveAlgorithm algorithm,
                    CommKind kind, double bytes, int n, GroupSpan span) {
  const Links l = LinksOf(spec, span);
  if (kind == CommKind::kSendRecv) {
    const double bw = span.inter_node() ? l.nic : l.nvlink;
    return Latency(p, span.inter_node() ? 0 : 1, span.inter_node() ? 1 : 0) +
           bytes / (bw * p.bandwidth_fraction());
  }
  if (algorithm == CollectiveAlgorithm::kNccl) return NcclTime(p, l, kind, bytes, n, span);
  double t = 0;
  if (kind != CommKind::kAllGather) {  // the all-to-all and the member-order sum of n chunks
    t += MemberOrderStep(p, l, bytes, n, span);
    const double hbm = spec.memory_bandwidth() * std::max(spec.bandwidth_efficiency(), 0.1);
    t += (n + 1.0) / n * bytes / hbm;
  }
  if (kind != CommKind::kReduceScatter) t += MemberOrderStep(p, l, bytes, n, span);
  return t;
}

}  // namespace

double GpuCollectiveTime(const DeviceSpec& spec, CollectiveAlgorithm algorithm, CommKind kind,
                         double bytes, int group_size, GroupSpan span) {
  if (group_size <= 1) return 0;
  double best = std::numeric_limits<double>::infinity();
  for (const Protocol& p : spec.collective_protocols())
    if (p.bandwidth_fraction() > 0)
      best = std::min(best, ProtocolTime(spec, p, algorithm, kind, bytes, group_size, span));
  // NCCL's latencies leave out the kernel's own floor (launch to first instruction).
  return best + spec.min_kernel_time();
}

}  // namespace pw::cost
