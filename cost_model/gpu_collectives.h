#pragma once
// What a collective or a transfer costs on GPUs from the device spec alone, by message size
// and by where the group sits (cost_model/comm_model.h says when it is used). Each of the
// spec's protocols prices it as a latency (a fixed part and one per step, over NVLink or the
// network) plus the bytes at the protocol's share of the bus bandwidth; the fastest protocol
// is taken, as NCCL's tuner picks one per call.
//
// Bus bandwidth: inside a node, the NVLink bandwidth NCCL reaches (intra_node_bandwidth x
// collective_bus_efficiency); across nodes, each member of a node sends through its own NIC
// (inter_node_bandwidth x network_efficiency), up to nics_per_node of them.
//
//   kNccl, ring: an all-reduce of n members is 2(n-1) steps, 2(m-1) of them across the m
//     nodes; every member moves 2(n-1)/n of the buffer (a reduce-scatter or all-gather: n-1
//     steps, (n-1)/n) through the ring's slowest link: NVLink, or the k NICs of a node whose
//     k members each start a ring of their own.
//   kNccl, tree (all-reduces spanning nodes): a chain inside each node and a binary tree
//     across nodes, up and down: 2((k-1) + log2(m)) steps, the buffer at about half the bus
//     bandwidth; the faster of ring and tree is taken.
//   kMemberOrder (pipeweave's transports): a reduce-scatter is one all-to-all step (every
//     member sends a chunk of bytes/n to each other member, the off-node ones through its own
//     NIC) and the sum of n chunks in member order; an all-gather one all-to-all step; an
//     all-reduce both. Across nodes every member's chunks cross on its own NIC, so with k
//     members a node it moves about k times the bytes per NIC of NCCL's ring.
//   Send/recv: one step over NVLink or one NIC.
// Every call also pays the spec's min_kernel_time, which NCCL's latencies leave out.

#include "cost_model/comm_model.h"

namespace pw::cost {

double GpuCollectiveTime(const DeviceSpec& spec, CollectiveAlgorithm algorithm, CommKind kind,
                         double bytes, int group_size, GroupSpan span);

}  // namespace pw::cost
