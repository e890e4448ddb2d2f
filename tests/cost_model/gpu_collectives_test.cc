// GPU collectives priced from the spec, against published NCCL measurements (nccl-tests
// bus bandwidth: 2(n-1)/n x bytes / time for an all-reduce) and against each other.

#include "cost_model/gpu_collectives.h"

#include <gtest/gtest.h>

namespace pw::cost {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double AllReduceBusBandwidth(const DeviceSpec& d, CollectiveAlgorithm a, double bytes, int n,
                             GroupSpan span) {
  return 2.0 * (n - 1) / n * bytes / GpuCollectiveTime(d, a, CommKind::kAllReduce, bytes, n, span);
}

TEST(GpuCollectives, RingOnEightH100sReachesNcclsNvlinkBandwidth) {
  // NVIDIA: NCCL's ring gets about 370 GB/s of NVLink 4 (NVIDIA/nccl-tests issue 212).
  DeviceSpec h100 = *BuiltinDeviceSpec("h100");
  double bus = AllReduceBusBandwidth(h100, CollectiveAlgorithm::kNccl, 8 * kGiB, 8, {1, 8});
  EXPECT_NEAR(bus / 370e9, 1.0, 0.03);
}

TEST(GpuCollectives, AcrossNodesEachMemberOfANodeAddsANic) {
  // One GPU per node: one HDR NIC, about 24 GB/s (NVIDIA/nccl issue 412).
  DeviceSpec a100 = *BuiltinDeviceSpec("a100");
  EXPECT_NEAR(AllReduceBusBandwidth(a100, CollectiveAlgorithm::kNccl, 8 * kGiB, 2, {2, 1}) / 24e9,
              1.0, 0.03);
  // Two nodes of four A100s with two 200 Gb/s NICs each: 45 GB/s measured; with four NICs
  // 78 GB/s measured (NVIDIA/nccl-tests issue 277). The model takes every NIC at 24 GB/s: 48
  // and 96 (the four-NIC system reached less per NIC; held within 25 %).
  a100.set_nics_per_node(2);
  EXPECT_NEAR(AllReduceBusBandwidth(a100, CollectiveAlgorithm::kNccl, 1 * kGiB, 8, {2, 4}) / 45e9,
              1.0, 0.10);
  a100.set_nics_per_node(4);
  EXPECT_NEAR(AllReduceBusBandwidth(a100, CollectiveAlgorithm::kNccl, 1 * kGiB, 8, {2, 4}) / 78e9,
              1.0, 0.25);
  // NVLink caps what the NICs of a full node could carry.
  a100.set_nics_per_node(8);
  a100.set_inter_node_bandwidth(100e9);
  EXPECT_NEAR(AllReduceBusBandwidth(a100, CollectiveAlgorithm::kNccl, 8 * kGiB, 16, {2, 8}) / 235e9,
              1.0, 0.03);
}

TEST(GpuCollectives, SmallMessagesCostTheLatencyOfTheCheapestProtocol) {
  // Two A100s, a 32-byte all-reduce: 10.1 us measured (NVIDIA/nccl issue 583). NCCL's LL
  // protocol plus the kernel's floor: 3.6 + 2 x 0.47 + 3 us.
  DeviceSpec a100 = *BuiltinDeviceSpec("a100");
  double t =
      GpuCollectiveTime(a100, CollectiveAlgorithm::kNccl, CommKind::kAllReduce, 32, 2, {1, 2});
  EXPECT_NEAR(t / 10.1e-6, 1.0, 0.30);
  // Bandwidth ramps with size: at 1 MiB far below the plateau, at 1 GiB near it.
  double small = AllReduceBusBandwidth(a100, CollectiveAlgorithm::kNccl, 1 << 20, 8, {1, 8});
  double large = AllReduceBusBandwidth(a100, CollectiveAlgorithm::kNccl, kGiB, 8, {1, 8});
  EXPECT_LT(small, 0.5 * large);
  EXPECT_GT(large, 0.95 * 235e9);
}

TEST(GpuCollectives, MemberOrderMatchesTheRingInsideANodeAndPaysPerNicAcrossNodes) {
  DeviceSpec h100 = *BuiltinDeviceSpec("h100");
  const double bytes = 1 * kGiB;
  auto time = [&](CollectiveAlgorithm a, GroupSpan span, int n) {
    return GpuCollectiveTime(h100, a, CommKind::kAllReduce, bytes, n, span);
  };
  // Inside a node both move 2(n-1)/n of the buffer over NVLink; member order adds its sum.
  double ring = time(CollectiveAlgorithm::kNccl, {1, 8}, 8);
  double member = time(CollectiveAlgorithm::kMemberOrder, {1, 8}, 8);
  EXPECT_GT(member, ring);
  EXPECT_LT(member, 1.15 * ring);
  // Four nodes of eight: NCCL crosses on eight rings (one per NIC), member order sends every
  // member's off-node chunks through its own NIC: about eight times the bytes per NIC.
  double ratio = time(CollectiveAlgorithm::kMemberOrder, {4, 8}, 32) /
                 time(CollectiveAlgorithm::kNccl, {4, 8}, 32);
  EXPECT_GT(ratio, 5.0);
  EXPECT_LT(ratio, 9.0);
  // One member a node (a data-parallel group of tensor-parallel ranks): the same NIC bytes.
  double alone = time(CollectiveAlgorithm::kMemberOrder, {8, 1}, 8) /
                 time(CollectiveAlgorithm::kNccl, {8, 1}, 8);
  EXPECT_NEAR(alone, 1.0, 0.2);
}

TEST(GpuCollectives, ReduceScatterAndAllGatherAreHalvesOfTheAllReduce) {
  DeviceSpec h100 = *BuiltinDeviceSpec("h100");
  for (CollectiveAlgorithm a : {CollectiveAlgorithm::kNccl, CollectiveAlgorithm::kMemberOrder}) {
    double ar = GpuCollectiveTime(h100, a, CommKind::kAllReduce, kGiB, 8, {1, 8});
    double rs = GpuCollectiveTime(h100, a, CommKind::kReduceScatter, kGiB, 8, {1, 8});
    double ag = GpuCollectiveTime(h100, a, CommKind::kAllGather, kGiB, 8, {1, 8});
    EXPECT_NEAR((rs + ag) / ar, 1.0, 0.02) << CollectiveAlgorithmName(a);
    EXPECT_GE(rs, ag) << CollectiveAlgorithmName(a);  // member order sums; the ring sums on the fly
  }
}

TEST(GpuCollectives, SpecValidationNamesWhatIsMissing) {
  DeviceSpec d = *BuiltinDeviceSpec("a100");
  d.set_network_efficiency(0);
  Status s = ValidateDeviceSpec(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("network_efficiency"), std::string::npos) << s.message();
  d = *BuiltinDeviceSpec("a100");
  d.mutable_collective_protocols(0)->set_bandwidth_fraction(0);
  s = ValidateDeviceSpec(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bandwidth_fraction"), std::string::npos) << s.message();
}

TEST(GpuCollectives, GroupSpanCountsNodesAndTheFullestNode) {
  DeviceSpec h100 = *BuiltinDeviceSpec("h100");  // 8 ranks a node
  EXPECT_EQ(SpanOf(h100, {0, 1, 2, 3}), (GroupSpan{1, 4}));
  EXPECT_EQ(SpanOf(h100, {0, 8, 16, 24}), (GroupSpan{4, 1}));
  EXPECT_EQ(SpanOf(h100, {6, 7, 8}), (GroupSpan{2, 2}));
}

}  // namespace
}  // namespace pw::cost
