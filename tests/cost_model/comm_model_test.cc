// Alpha-beta fits and the communication fall-backs.

#include "cost_model/comm_model.h"

#include <gtest/gtest.h>

#include "cost_model/comm_profiler.h"
#include "simulator/comm_sizes.h"

namespace pw::cost {
namespace {

TEST(CommModel, FitRecoversAlphaAndBeta) {
  std::vector<CommSampleValue> samples;
  for (double bytes : {1e3, 1e4, 1e5, 1e6}) samples.push_back({bytes, 20e-6 + bytes * 1e-9, 0});
  CommFit fit = FitCommSamples("all_reduce", 2, samples);
  EXPECT_NEAR(fit.alpha(), 20e-6, 1e-12);
  EXPECT_NEAR(fit.beta(), 1e-9, 1e-15);
  EXPECT_NEAR(fit.residual(), 0, 1e-9);
  EXPECT_EQ(fit.samples_size(), 4);
}

TEST(CommModel, AGroupOfOneGetsNoFit) {
  // An mp=1 pipeline's all-reduces run over groups of one: they move nothing, and a fit of
  // group size 1 is refused by the simulator, so profile --comm writes none.
  CommRunResult run;
  run.ranks = 2;
  run.measured_steps = 2;
  run.ops = {{CommKind::kAllReduce, 1, 4096, 2e-6, 0},
             {CommKind::kSendRecv, 2, 4096, 30e-6, 0},
             {CommKind::kSendRecv, 2, 65536, 60e-6, 0}};
  std::vector<CommFit> fits = FitMeasuredComm(run, CommProfileOptions{});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].kind(), "send_recv");
  EXPECT_EQ(fits[0].group_size(), 2);
}

TEST(CommModel, ResidualReportsTheMisfit) {
  CommFit fit = FitCommSamples("send_recv", 2, {{1e3, 10e-6, 0}, {1e4, 30e-6, 0}, {1e5, 20e-6, 0}});
  EXPECT_GT(fit.residual(), 0.1);
  EXPECT_GE(fit.alpha(), 0);
  EXPECT_GE(fit.beta(), 0);
}

TEST(CommModel, UsesFitsThenScalesToOtherGroupSizes) {
  DeviceSpec d = *BuiltinDeviceSpec("cpu");
  CommFit two = FitCommSamples("all_reduce", 2, {{1e3, 21e-6, 0}, {1e6, 1.02e-3, 0}});
  CommModel m(d, {two});
  CommEstimate e = m.Time(CommKind::kAllReduce, 1e6, 2, GroupSpan::Pair(false));
  EXPECT_TRUE(e.from_fit);
  EXPECT_NEAR(e.seconds, 1.02e-3, 1e-9);
  // Four ranks: the same two latency steps (member order), 1.5x the bytes per rank.
  EXPECT_NEAR(m.Time(CommKind::kAllReduce, 1e6, 4, GroupSpan::Pair(false)).seconds,
              two.alpha() + 1.5 * two.beta() * 1e6, 1e-12);
  EXPECT_EQ(m.Time(CommKind::kAllReduce, 1e6, 1, GroupSpan::Pair(false)).seconds, 0);
}

TEST(CommModel, FallsBackToTheDeviceLinks) {
  // A spec without collective protocols: the plain latency-bandwidth model.
  DeviceSpec d = *BuiltinDeviceSpec("h100");
  d.clear_collective_protocols();
  CommModel m(d, {});
  CommEstimate p2p = m.Time(CommKind::kSendRecv, 450e6, 2, GroupSpan::Pair(false));
  EXPECT_FALSE(p2p.from_fit);
  EXPECT_NEAR(p2p.seconds, d.intra_node_latency() + 1e-3, 1e-9);
  // The member-order all-reduce: two steps of latency at any group size, the ring's bytes.
  CommEstimate reduce = m.Time(CommKind::kAllReduce, 8e6, 8, GroupSpan::Pair(true));
  EXPECT_NEAR(reduce.seconds,
              2 * d.inter_node_latency() + 2.0 * 7 / 8 * 8e6 / d.inter_node_bandwidth(), 1e-12);
}

// Sequence parallelism's halves of the all-reduce: one member-order step each, (n-1)/n of the
// whole buffer; from the links, and from a measured all-reduce when only that was profiled.
TEST(CommModel, AllGatherAndReduceScatterAreHalvesOfTheAllReduce) {
  DeviceSpec d = *BuiltinDeviceSpec("h100");
  d.clear_collective_protocols();  // the plain latency-bandwidth model (GpuCollectives: NCCL's)
  CommModel links(d, {});
  for (CommKind half : {CommKind::kAllGather, CommKind::kReduceScatter}) {
    EXPECT_NEAR(links.Time(half, 8e6, 8, GroupSpan{1, 8}).seconds,
                d.intra_node_latency() + 7.0 / 8 * 8e6 / d.intra_node_bandwidth(), 1e-12);
    EXPECT_EQ(links.Time(half, 8e6, 1, GroupSpan{}).seconds, 0);
  }
  CommFit two = FitCommSamples("all_reduce", 2, {{1e3, 21e-6, 0}, {1e6, 1.02e-3, 0}});
  CommModel measured(*BuiltinDeviceSpec("cpu"), {two});
  EXPECT_NEAR(measured.Time(CommKind::kReduceScatter, 1e6, 2, GroupSpan::Pair(false)).seconds,
              0.51e-3, 1e-9);
  // Profiled as such, a half is priced by its own fit.
  CommFit gather = FitCommSamples("all_gather", 2, {{1e3, 5e-6, 0}, {1e6, 0.2e-3, 0}});
  CommModel own(*BuiltinDeviceSpec("cpu"), {two, gather});
  EXPECT_NEAR(own.Time(CommKind::kAllGather, 1e6, 2, GroupSpan::Pair(false)).seconds, 0.2e-3, 1e-9);
  EXPECT_STREQ(CommKindName(CommKind::kReduceScatter), "reduce_scatter");
}

TEST(CommModel, InterpolatesMeasuredSizesAndUsesTheirMeans) {
  // A step function no alpha-beta line fits: measured sizes are priced as measured.
  CommFit fit = FitCommSamples(
      "send_recv", 2, {{4096, 50e-6, 0, 60e-6}, {8192, 2e-3, 0, 2e-3}, {65536, 2.1e-3, 0, 2.2e-3}});
  CommModel m(*BuiltinDeviceSpec("cpu"), {fit});
  EXPECT_NEAR(m.Time(CommKind::kSendRecv, 4096, 2, GroupSpan::Pair(false)).seconds, 60e-6,
              1e-12);  // the mean
  EXPECT_NEAR(m.Time(CommKind::kSendRecv, 8192, 2, GroupSpan::Pair(false)).seconds, 2e-3, 1e-12);
  EXPECT_NEAR(m.Time(CommKind::kSendRecv, 6144, 2, GroupSpan::Pair(false)).seconds,
              (60e-6 + 2e-3) / 2, 1e-12);
  // Beyond the samples: the fit's line.
  EXPECT_NEAR(m.Time(CommKind::kSendRecv, 1e6, 2, GroupSpan::Pair(false)).seconds,
              fit.alpha() + fit.beta() * 1e6, 1e-12);
}

TEST(CommModel, PricesUnderTheLoadItMeets) {
  CommFit idle = FitCommSamples("all_reduce", 2, {{1e3, 4e-3, 0}, {1e5, 4e-3, 0}}, 0);
  CommFit busy = FitCommSamples("all_reduce", 2, {{1e3, 0.2e-3, 0}, {1e5, 0.2e-3, 0}}, 2);
  CommModel m(*BuiltinDeviceSpec("cpu"), {idle, busy});
  EXPECT_NEAR(m.Time(CommKind::kAllReduce, 1e4, 2, GroupSpan::Pair(false), 0).seconds, 4e-3, 1e-12);
  EXPECT_NEAR(m.Time(CommKind::kAllReduce, 1e4, 2, GroupSpan::Pair(false), 2).seconds, 0.2e-3,
              1e-12);
  EXPECT_NEAR(m.Time(CommKind::kAllReduce, 1e4, 2, GroupSpan::Pair(false), 1).seconds, 2.1e-3,
              1e-12);
  EXPECT_NEAR(m.Time(CommKind::kAllReduce, 1e4, 2, GroupSpan::Pair(false), 5).seconds, 0.2e-3,
              1e-12);  // beyond
}

// Stands in for the measuring run: two all-reduces and a transfer after the first step.
class FakeBench final : public CommBenchmark {
 public:
  StatusOr<CommRunResult> Run(const Module& plan, int steps) override {
    ++runs;
    last_steps = steps;
    CommRunResult r;
    r.ranks = 4;
    r.measured_steps = steps - 1;
    r.ops = {{CommKind::kAllReduce, 2, 4096, 1.0e-3, 0.1e-3},
             {CommKind::kAllReduce, 2, 4096, 1.2e-3, 0.3e-3},
             {CommKind::kSendRecv, 2, 8192, 0.5e-3, 0}};
    r.process_cpu = 10e-3;
    r.step_seconds = {9e-3, 7e-3, 8e-3};
    r.caught = caught;
    return r;
  }
  int runs = 0;
  int last_steps = 0;
  CaughtSpins caught;
};

TEST(CommProfiler, FitsWhatTheRunMeasured) {
  FakeBench bench;
  CommProfileOptions o;
  o.steps = 3;               // two measured steps
  o.compute_seconds = 2e-3;  // per step, over all ranks
  o.compute_gap = 0.5e-3;
  Module plan;
  plan.name = "plan";
  auto profile = ProfileComm(bench, plan, o);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_DOUBLE_EQ(profile->step_seconds, 8e-3);  // the median step
  const std::vector<CommFit>* fits = &profile->fits;
  EXPECT_EQ(bench.last_steps, 3);
  ASSERT_EQ(fits->size(), 2u);  // all-reduce over 2, send/recv
  const CommFit& ar = (*fits)[0];
  EXPECT_EQ(ar.kind(), "all_reduce");
  EXPECT_EQ(ar.ranks(), 4);
  EXPECT_DOUBLE_EQ(ar.compute_gap(), 0.5e-3);
  EXPECT_NEAR(ar.straggle(), 0.2e-3, 1e-12);
  // 10 ms of process CPU less 2 x 2 ms of compute, over 6 rank-operations (2 per op).
  EXPECT_NEAR(ar.cpu_per_op(), 1e-3, 1e-12);
  CommModel m(*BuiltinDeviceSpec("cpu"), *fits);
  CommEstimate e = m.Time(CommKind::kAllReduce, 4096, 2, GroupSpan::Pair(false));
  EXPECT_NEAR(e.seconds, 1.1e-3, 1e-12);  // the mean of the two
  EXPECT_NEAR(e.cpu, 1e-3, 1e-12);
  EXPECT_NEAR(e.straggle, 0.2e-3, 1e-12);
  EXPECT_NEAR(m.Time(CommKind::kSendRecv, 8192, 2, GroupSpan::Pair(false)).seconds, 0.5e-3, 1e-12);
  o.steps = 1;  // nothing left to measure after the warm-up step
  EXPECT_FALSE(ProfileComm(bench, plan, o).ok());
}

TEST(CommProfiler, WaitsCaughtSpinningAreNotChargedToCommunication) {
  // The run's threads caught 40 waits spinning, 3 ms of its CPU: priced apart
  // (DeviceSpec.spin_cpu_share), so communication keeps 10 - 3 - 2 x 2 ms over 6
  // rank-operations.
  FakeBench bench;
  bench.caught = {.waits = 40, .cpu_seconds = 3e-3};
  CommProfileOptions o;
  o.steps = 3;
  o.compute_seconds = 2e-3;
  Module plan;
  plan.name = "plan";
  auto profile = ProfileComm(bench, plan, o);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->caught.waits, 40);
  EXPECT_DOUBLE_EQ(profile->caught.cpu_seconds, 3e-3);
  ASSERT_FALSE(profile->fits.empty());
  EXPECT_NEAR(profile->fits[0].cpu_per_op(), 0.5e-3, 1e-12);
}

// Ranks come apart differently at collectives on compute streams (inline, in lockstep) and on
// communication streams (beside their compute): each kind gets its own straggle, and where
// a table measured only one, it stands for both.
TEST(CommProfiler, StragglesOnComputeAndCommunicationStreamsApart) {
  CommRunResult run;
  run.ranks = 2;
  for (int i = 0; i < 4; ++i) {
    MeasuredComm m;
    m.bytes = 4096;
    m.seconds = 1e-3;
    m.on_comm_stream = i % 2 == 1;
    m.straggle = m.on_comm_stream ? 0.8e-3 : 0.1e-3;
    run.ops.push_back(m);
  }
  std::vector<CommFit> fits = FitMeasuredComm(run, CommProfileOptions{});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_NEAR(fits[0].straggle(), 0.1e-3, 1e-12);
  EXPECT_NEAR(fits[0].comm_stream_straggle(), 0.8e-3, 1e-12);
  CommEstimate e = CommModel(*BuiltinDeviceSpec("cpu"), fits)
                       .Time(CommKind::kAllReduce, 4096, 2, GroupSpan::Pair(false));
  EXPECT_NEAR(e.straggle, 0.1e-3, 1e-12);
  EXPECT_NEAR(e.comm_stream_straggle, 0.8e-3, 1e-12);
  // Only compute streams measured (a table written before the split reads the same way).
  CommFit inline_only = fits[0];
  inline_only.clear_comm_stream_straggle();
  e = CommModel(*BuiltinDeviceSpec("cpu"), {inline_only})
          .Time(CommKind::kAllReduce, 4096, 2, GroupSpan::Pair(false));
  EXPECT_NEAR(e.comm_stream_straggle, 0.1e-3, 1e-12);
  // Only communication streams measured.
  CommFit beside_only = fits[0];
  beside_only.clear_straggle();
  e = CommModel(*BuiltinDeviceSpec("cpu"), {beside_only})
          .Time(CommKind::kAllReduce, 4096, 2, GroupSpan::Pair(false));
  EXPECT_NEAR(e.straggle, 0.8e-3, 1e-12);
}

TEST(CommProfiler, TheDutyCycleIsComputePerCommunication) {
  // Rank 0: 3 ms of compute and 2 collectives; rank 1: 1 ms and 1 collective and 1 send.
  SimGraph g;
  g.world_size = 2;
  auto add = [&](int rank, InstrKind kind, double seconds) {
    SimInstr in;
    in.rank = rank;
    in.kind = kind;
    in.seconds = seconds;
    in.group_size = 2;
    in.bytes = 1024;
    g.instrs.push_back(in);
  };
  add(0, InstrKind::kCompute, 3e-3);
  add(0, InstrKind::kCollective, 0);
  add(0, InstrKind::kCollective, 0);
  add(1, InstrKind::kCompute, 1e-3);
  add(1, InstrKind::kCollective, 0);
  add(1, InstrKind::kSend, 0);
  CommSizes sizes = CommSizesOf(g, 1e-3);  // 1 ms of runtime per compute op
  EXPECT_NEAR(sizes.compute_gap, (4e-3 / 2 + 2e-3 / 2) / 2, 1e-12);
  EXPECT_NEAR(sizes.compute_seconds, 6e-3, 1e-12);
  EXPECT_EQ(sizes.allreduce_bytes, (std::vector<int64_t>{1024}));
  EXPECT_EQ(sizes.p2p_bytes, (std::vector<int64_t>{1024}));
}

}  // namespace
}  // namespace pw::cost
