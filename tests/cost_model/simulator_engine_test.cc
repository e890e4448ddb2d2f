// The simulation engine on hand-made instruction graphs: sharing cores between ranks, the
// slowdown of compute beside communication, and deadlocks.

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace pw::cost {
namespace {

using namespace testing;

DeviceSpec Cores(int cores, double slowdown = 0, double comm_threads = 0) {
  DeviceSpec d = testing::TestDevice();
  d.set_cores_per_node(cores);
  d.set_overlap_slowdown(slowdown);
  d.set_comm_threads(comm_threads);
  return d;
}

TEST(SimulatorEngine, RanksShareTheCoresOfANode) {
  GraphBuilder b(2);
  b.Compute(0, 1.0);
  b.Compute(1, 1.0);
  auto shared = Simulate(b.graph(), Cores(1));
  ASSERT_TRUE(shared.ok());
  EXPECT_NEAR(shared->step_time, 2.0, 1e-9);  // two runnable threads on one core
  auto own = Simulate(b.graph(), Cores(2));
  ASSERT_TRUE(own.ok());
  EXPECT_NEAR(own->step_time, 1.0, 1e-9);
  auto gpu = Simulate(b.graph(), Cores(0));  // every rank its own device
  EXPECT_NEAR(gpu->step_time, 1.0, 1e-9);
}

TEST(SimulatorEngine, SharingFollowsTheRunnableThreadsOverTime) {
  // Three 1 s ops on two cores: all three at 2/3 speed until 1.5 s.
  GraphBuilder b(3);
  b.Compute(0, 1.0);
  b.Compute(1, 1.0);
  b.Compute(2, 1.0);
  auto r = Simulate(b.graph(), Cores(2));
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_time, 1.5, 1e-9);
  // One of them longer: after the others finish it gets a whole core again.
  GraphBuilder c(3);
  c.Compute(0, 1.0);
  c.Compute(1, 1.0);
  c.Compute(2, 2.0);
  auto r2 = Simulate(c.graph(), Cores(2));
  ASSERT_TRUE(r2.ok());
  EXPECT_NEAR(r2->step_time, 1.5 + (2.0 - 1.0), 1e-9);
}

TEST(SimulatorEngine, ComputeSlowsBesideCommunication) {
  GraphBuilder b(2);
  b.Compute(0, 1.0);
  b.Transfer(0, 1, 1.0);
  // While the transfer runs (1 s) compute moves at 1/1.5: 2/3 done, then 1/3 at full speed.
  auto r = Simulate(b.graph(), Cores(0, 0.5));
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->timeline.empty());
  EXPECT_NEAR(r->timeline[0].end, 1.0 + 1.0 / 3, 1e-9);
  EXPECT_NEAR(r->ranks[0].exposed_comm, 0, 1e-9);
  EXPECT_NEAR(r->ranks[1].exposed_comm, 1.0, 1e-9);  // rank 1 has no compute to hide it
}

TEST(SimulatorEngine, EagerSendFreesItsStreamAtOnce) {
  GraphBuilder b(2);
  auto [s1, r1] = b.Transfer(0, 1, 1.0);
  auto [s2, r2] = b.Transfer(0, 1, 1.0);
  auto eager = Simulate(b.graph(), Cores(0));
  ASSERT_TRUE(eager.ok());
  // Both sends post at 0 and share the link from rank 0 to rank 1: both data are there
  // at 2 s (the recvs run in order on their stream).
  EXPECT_NEAR(eager->timeline[r1].end, 2.0, 1e-9);
  EXPECT_NEAR(eager->timeline[r2].end, 2.0, 1e-9);
  SimOptions rendezvous;
  rendezvous.rendezvous_p2p = true;
  auto rv = Simulate(b.graph(), Cores(0), rendezvous);
  ASSERT_TRUE(rv.ok());
  EXPECT_NEAR(rv->timeline[r2].end, 2.0, 1e-9);  // the second waits for the first
  (void)s1;
  (void)s2;
}

TEST(SimulatorEngine, CollectivesAtOnceShareTheirRanksLinks) {
  // Two 1 s all-reduces of the same ranks on two streams run side by side at half speed,
  // and a third on other ranks is not slowed.
  GraphBuilder b(4);
  const int fwd = b.Collective({0, 1}, 1.0, StreamType::kMpFwdComm)[0];
  const int bwd = b.Collective({0, 1}, 1.0, StreamType::kMpComm)[0];
  const int other = b.Collective({2, 3}, 1.0, StreamType::kMpComm)[0];
  auto r = Simulate(b.graph(), Cores(0));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->timeline[fwd].end, 2.0, 1e-9);
  EXPECT_NEAR(r->timeline[bwd].end, 2.0, 1e-9);
  EXPECT_NEAR(r->timeline[other].end, 1.0, 1e-9);
}

TEST(SimulatorEngine, ReportsADeadlockWithTheWaitingStreams) {
  // Each rank computes on data from the other before sending its own.
  GraphBuilder b(2);
  SimGraph& g = b.graph();
  int recv0 = b.Add(0, StreamType::kPpRecv, InstrKind::kRecv, 0.1);
  int c0 = b.Compute(0, 1.0, {recv0});
  int send0 = b.Add(0, StreamType::kPpSend, InstrKind::kSend, 0.1, {c0});
  int recv1 = b.Add(1, StreamType::kPpRecv, InstrKind::kRecv, 0.1);
  int c1 = b.Compute(1, 1.0, {recv1});
  int send1 = b.Add(1, StreamType::kPpSend, InstrKind::kSend, 0.1, {c1});
  g.instrs[send0].partner = recv1;
  g.instrs[recv1].partner = send0;
  g.instrs[send1].partner = recv0;
  g.instrs[recv0].partner = send1;
  auto r = Simulate(g, Cores(0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deadlocks"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("rank 0 pp_recv"), std::string::npos) << r.status().message();
}

TEST(SimulatorEngine, PricesACollectiveUnderTheLoadOfItsNode) {
  // All-reduce between ranks 0 and 1: 4 ms with the cores idle, 0.2 ms with one busy.
  CommFit idle = FitCommSamples("all_reduce", 2, {{1e3, 4e-3, 0}, {1e6, 4e-3, 0}}, 0);
  CommFit busy = FitCommSamples("all_reduce", 2, {{1e3, 0.2e-3, 0}, {1e6, 0.2e-3, 0}}, 1);
  CommModel comm(*BuiltinDeviceSpec("cpu"), {idle, busy});
  auto graph = [](double other_compute) {
    GraphBuilder b(3);
    b.Collective({0, 1}, 1.0);
    if (other_compute > 0) b.Compute(2, other_compute);  // rank 2 computes meanwhile
    return b.graph();
  };
  SimGraph quiet = graph(0), loaded = graph(1.0);
  auto r = Simulate(quiet, Cores(1), {}, &comm);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->timeline[0].end, 4e-3, 1e-9);
  auto l = Simulate(loaded, Cores(1), {}, &comm);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_NEAR(l->timeline[0].end, 0.2e-3, 1e-9);
  // Without a comm model the collective takes its own seconds.
  auto plain = Simulate(quiet, Cores(1));
  EXPECT_NEAR(plain->timeline[0].end, 1.0, 1e-9);
}

TEST(SimulatorEngine, CommunicationKeepsWhatItMeasuredOfTheCores) {
  // Ranks 0 and 1 all-reduce for 1 s, spending 0.25 s of CPU each (the transport's threads);
  // rank 2 computes 1 s meanwhile on the node's only core. The collective keeps half the
  // core: the compute runs on the other half while it lasts (not at 1 / (1 + 0.25 + 0.25),
  // which would have the node's threads use 1.17 cores), then alone.
  CommFit fit = FitCommSamples("all_reduce", 2, {{1e3, 1.0, 0}, {1e6, 1.0, 0}});
  fit.set_cpu_per_op(0.25);
  CommModel comm(*BuiltinDeviceSpec("cpu"), {fit});
  GraphBuilder b(3);
  SimGraph& g = b.graph();
  const int a0 = b.Collective({0, 1}, 1.0)[0];
  int work = b.Compute(2, 1.0);
  auto r = Simulate(g, Cores(1), {}, &comm);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->timeline[a0].end, 1.0, 1e-9);    // priced as measured
  EXPECT_NEAR(r->timeline[work].end, 1.5, 1e-9);  // 0.5 s of work done by 1 s, then alone
  // The core time the step used: the collective's 2 x 0.25 s and the compute's 1 s, the
  // node's one core all along.
  EXPECT_NEAR(r->cpu, 1.5, 1e-9);
  EXPECT_NEAR(r->CpuInRun(), 1.5, 1e-9);
  EXPECT_NEAR(r->ranks[0].cpu, 0.25, 1e-9);
  EXPECT_NEAR(r->ranks[2].cpu, 1.0, 1e-9);
  // A device without cores to share (a GPU's) counts none.
  auto gpu = Simulate(g, testing::TestDevice(), {}, &comm);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  EXPECT_EQ(gpu->cpu, 0);
  // Without a measured CPU cost, communication sleeps (the CPU spec's comm_threads is 0).
  fit.set_cpu_per_op(0);
  CommModel sleeping(*BuiltinDeviceSpec("cpu"), {fit});
  auto s = Simulate(g, Cores(1), {}, &sleeping);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NEAR(s->timeline[work].end, 1.0, 1e-9);
  EXPECT_NEAR(s->cpu, 1.0, 1e-9);
}

// An all-reduce of two members measured at 1 s whatever its size, its last member 0.25 s
// behind the others on average.
CommModel StragglingAllReduce() {
  CommFit fit = FitCommSamples("all_reduce", 2, {{1e3, 1.0, 0}, {1e6, 1.0, 0}});
  fit.set_straggle(0.25);
  return CommModel(*BuiltinDeviceSpec("cpu"), {fit});
}

// Ranks 0 and 1 each run an op of `seconds` on their compute streams, then all-reduce on
// their mp_comm streams, each member waiting for its rank's op. Returns {op of rank 0,
// the collective's last member}.
std::pair<int, int> CommStreamCollectiveAfterCompute(GraphBuilder& b, double seconds) {
  const int f0 = b.Compute(0, seconds), f1 = b.Compute(1, seconds);
  const std::vector<int> m = b.Collective({0, 1}, 1.0, StreamType::kMpComm);
  b.graph().instrs[m[0]].deps.push_back(f0);
  b.graph().instrs[m[1]].deps.push_back(f1);
  return {f0, m[1]};
}

TEST(SimulatorEngine, ACollectiveWaitsForItsStragglers) {
  // Equal ranks reach it together in the simulation; on shared cores the last one came
  // 0.25 s after the others on average, and the collective waits for it.
  const CommModel comm = StragglingAllReduce();
  GraphBuilder b(2);
  const int a1 = b.Collective({0, 1}, 1.0)[1];
  auto r = Simulate(b.graph(), Cores(2), {}, &comm);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->timeline[a1].end, 1.25, 1e-9);
}

TEST(SimulatorEngine, RanksTakingTurnsOnTheCoresWaitForTheirMeasuredShareOfTheStraggle) {
  // Two ranks on one core take turns: the member that reaches the all-reduce first waits
  // on its compute stream, leaving the core to the late one, which the even sharing of the
  // core stands for; of the straggle it waits the device's turn_straggle share (none
  // unless profiled). On a communication stream the rank's compute goes on beside the
  // wait, and the collective waits for the straggler.
  const CommModel comm = StragglingAllReduce();
  GraphBuilder on_compute(2);
  const int a = on_compute.Collective({0, 1}, 1.0)[1];
  auto turns = Simulate(on_compute.graph(), Cores(1), {}, &comm);
  ASSERT_TRUE(turns.ok()) << turns.status().message();
  EXPECT_NEAR(turns->timeline[a].end, 1.0, 1e-9);
  DeviceSpec measured = Cores(1);
  measured.set_turn_straggle(0.4);
  auto shared = Simulate(on_compute.graph(), measured, {}, &comm);
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_NEAR(shared->timeline[a].end, 1.0 + 0.4 * 0.25, 1e-9);
  // Where the cores are enough for the ranks, no turns: the whole straggle, whatever the
  // share.
  measured.set_cores_per_node(2);
  auto apart = Simulate(on_compute.graph(), measured, {}, &comm);
  ASSERT_TRUE(apart.ok()) << apart.status().message();
  EXPECT_NEAR(apart->timeline[a].end, 1.25, 1e-9);
  // Each member's mp_comm thread waits 1 s for its compute stream and is woken for it.
  GraphBuilder on_comm_stream(2);
  const int c = CommStreamCollectiveAfterCompute(on_comm_stream, 1.0).second;
  auto beside = Simulate(on_comm_stream.graph(), Cores(1), {}, &comm);
  ASSERT_TRUE(beside.ok()) << beside.status().message();
  EXPECT_NEAR(beside->timeline[c].end, 2.0 + 1.25, 1e-9);  // the core shared until 2 s
}

TEST(SimulatorEngine, CommunicationThreadsThatWereRunningReachACollectiveTogether) {
  // The mp_comm threads catch their events spinning (the waits are short): neither was
  // woken, both were running when the event came, and no straggle is added. With a table
  // that does not model the spin every wait blocks and the straggle is back.
  const CommModel comm = StragglingAllReduce();
  GraphBuilder b(2);
  const int c = CommStreamCollectiveAfterCompute(b, 1e-6).second;
  DeviceSpec d = Cores(2);
  d.set_spin_latency(0);
  auto spinning = Simulate(b.graph(), d, {}, &comm);
  ASSERT_TRUE(spinning.ok()) << spinning.status().message();
  EXPECT_NEAR(spinning->timeline[c].end, 1e-6 + 1.0, 1e-9);
  d.set_spin_budget(0);
  auto blocking = Simulate(b.graph(), d, {}, &comm);
  ASSERT_TRUE(blocking.ok()) << blocking.status().message();
  EXPECT_NEAR(blocking->timeline[c].end, 1e-6 + 1.25, 1e-9);
}

TEST(SimulatorEngine, ACollectiveBesideItsRanksComputeWaitsForItsStragglers) {
  // As above, the mp_comm threads catch their events spinning; but rank 0 goes on computing
  // (an overlap pass's plan) while the all-reduce runs: its thread competes with that
  // compute for the cores the ranks share, the members reach the collective apart, and it
  // waits for the straggle again.
  const CommModel comm = StragglingAllReduce();
  GraphBuilder b(2);
  const auto [f0, c] = CommStreamCollectiveAfterCompute(b, 1e-6);
  b.Compute(0, 2.0, {f0});  // the next op of rank 0's compute stream
  DeviceSpec d = Cores(2);
  d.set_spin_latency(0);
  auto beside = Simulate(b.graph(), d, {}, &comm);
  ASSERT_TRUE(beside.ok()) << beside.status().message();
  EXPECT_NEAR(beside->timeline[c].end, 1e-6 + 1.25, 1e-9);
}

TEST(SimulatorEngine, WakingOnBusyCoresCostsTheSchedulerLatency) {
  // Rank 0: a 1 s op on the compute stream, then an op on mp_comm that waits for it, and
  // rank 1 an op that waits for it too; rank 2 keeps the node's only core busy for 3 s.
  GraphBuilder b(3);
  int first = b.Compute(0, 1.0);
  int same_rank = b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 1.0, {first});
  int other_rank = b.Compute(1, 1.0, {first});
  b.Compute(2, 3.0);
  DeviceSpec d = Cores(0);
  d.set_busy_wake_latency(0.25);
  auto free = Simulate(b.graph(), d);
  EXPECT_NEAR(free->timeline[other_rank].start, 1.0, 1e-9);  // no cores modelled: no wait
  d.set_cores_per_node(3);
  auto idle = Simulate(b.graph(), d);
  EXPECT_NEAR(idle->timeline[other_rank].start, 1.0, 1e-9);  // a core is free: no wait
  d.set_cores_per_node(1);
  auto busy = Simulate(b.graph(), d);
  // Two threads on one core: the first op ends at 2 s. Another rank's thread wakes 0.25 s
  // later; a stream of the same rank takes the core the first op's thread releases.
  EXPECT_NEAR(busy->timeline[other_rank].start, 2.25, 1e-9);
  EXPECT_NEAR(busy->timeline[same_rank].start, 2.0, 1e-9);
}

TEST(SimulatorEngine, AWaitForAnotherStreamCostsTheNodeItsCpu) {
  // One core. The compute stream runs two 1 s ops; mp_comm's op waits for the first, so its
  // thread sleeps until then and its wake-up costs wait_cpu of the core; a second mp_comm
  // op follows its stream predecessor and has nothing else to wait for.
  GraphBuilder b(1);
  int first = b.Compute(0, 1.0);
  b.Compute(0, 1.0);
  int woken = b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 1.0, {first});
  b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 0.5, {woken, first});
  DeviceSpec d = Cores(1);
  auto free = Simulate(b.graph(), d);
  ASSERT_TRUE(free.ok());
  EXPECT_NEAR(free->step_time, 3.5, 1e-9);  // all the node's work on one core
  EXPECT_EQ(free->stream_waits, 1);
  d.set_wait_cpu(0.25);
  auto costed = Simulate(b.graph(), d);
  ASSERT_TRUE(costed.ok());
  EXPECT_NEAR(costed->step_time, 3.75, 1e-9);  // and the wake-up's CPU
  EXPECT_EQ(costed->stream_waits, 1);
  d.set_cores_per_node(0);  // streams waiting on a device: no CPU taken
  auto gpu = Simulate(b.graph(), d);
  ASSERT_TRUE(gpu.ok());
  EXPECT_NEAR(gpu->step_time, 2.5, 1e-9);
}

TEST(SimulatorEngine, APipelineTransferCostsABusyNodeItsMeasuredCpu) {
  // Two ranks on one node. Rank 0 computes 1 s, sends (its pp_send thread woken by that op's
  // event) and computes 1 s more; rank 1 computes 3 s beside it, then 0.5 s on the data.
  // transfer_cpu 0.2 s: half where the send starts, half where the recv ends, both while
  // the two ranks' ops hold both cores: each op loses 0.1 s to them.
  GraphBuilder b(2);
  const int first = b.Compute(0, 1.0);
  const auto [send, recv] = b.Transfer(0, 1, 1e-3, {first});
  const int second = b.Compute(0, 1.0);
  const int long_op = b.Compute(1, 3.0);
  const int last = b.Compute(1, 0.5, {recv});
  DeviceSpec d = Cores(2);
  auto uncharged = Simulate(b.graph(), d);
  ASSERT_TRUE(uncharged.ok()) << uncharged.status().message();
  EXPECT_NEAR(uncharged->timeline[last].end, 3.5, 1e-9);
  d.set_transfer_cpu(0.2);
  auto charged = Simulate(b.graph(), d);
  ASSERT_TRUE(charged.ok()) << charged.status().message();
  EXPECT_NEAR(charged->timeline[second].end, 2.1, 1e-9);
  EXPECT_NEAR(charged->timeline[long_op].end, 3.1, 1e-9);
  EXPECT_NEAR(charged->timeline[last].end, 3.6, 1e-9);
  // The sending thread's wake-up is part of the transfer's CPU, not a wait_cpu on top (that
  // alone would cost each op 0.15 s).
  d.set_wait_cpu(0.3);
  auto with_wait = Simulate(b.graph(), d);
  ASSERT_TRUE(with_wait.ok());
  EXPECT_NEAR(with_wait->timeline[last].end, 3.6, 1e-9);
  EXPECT_EQ(with_wait->stream_waits, charged->stream_waits);
  d.set_transfer_cpu(0);
  auto only_wait = Simulate(b.graph(), d);
  ASSERT_TRUE(only_wait.ok());
  EXPECT_NEAR(only_wait->timeline[last].end, 3.65, 1e-9);
  // Without rank 0's second op a core is free when each end's threads run (the transfer
  // takes 0.5 s, so that its two ends do not run at once): nothing lost.
  GraphBuilder idle(2);
  const auto [idle_send, idle_recv] = idle.Transfer(0, 1, 0.5, {idle.Compute(0, 1.0)});
  idle.Compute(1, 3.0);
  const int idle_last = idle.Compute(1, 0.5, {idle_recv});
  d.set_transfer_cpu(0.2);
  auto free = Simulate(idle.graph(), d);
  ASSERT_TRUE(free.ok());
  EXPECT_NEAR(free->timeline[idle_last].end, 3.5, 1e-9);
  (void)send;
  (void)idle_send;
}

TEST(SimulatorEngine, AChargedTransferKeepsNoCoreWhileItRuns) {
  // A transfer measured at 1 s with 0.25 s of CPU per member (a residual of a whole run)
  // beside 1.5 s of compute on rank 2, one core: with transfer_cpu, the transfer's CPU is
  // charged where its threads run (here 0.1 s, half at each end, while rank 2 computes),
  // not spread over its time.
  CommFit fit = FitCommSamples("send_recv", 2, {{1e3, 1.0, 0}, {1e6, 1.0, 0}});
  fit.set_cpu_per_op(0.25);
  CommModel comm(*BuiltinDeviceSpec("cpu"), {fit});
  GraphBuilder b(3);
  const int send = b.Transfer(0, 1, 1.0).first;
  b.graph().instrs[send].group_size = 2;
  b.graph().instrs[send].bytes = 1e4;
  const int work = b.Compute(2, 1.5);
  auto spread = Simulate(b.graph(), Cores(1), {}, &comm);
  ASSERT_TRUE(spread.ok()) << spread.status().message();
  EXPECT_NEAR(spread->timeline[work].end, 2.0, 1e-9);  // half the core for the transfer's 1 s
  DeviceSpec d = Cores(1);
  d.set_transfer_cpu(0.1);
  auto charged = Simulate(b.graph(), d, {}, &comm);
  ASSERT_TRUE(charged.ok()) << charged.status().message();
  EXPECT_NEAR(charged->timeline[work].end, 1.6, 1e-9);
}

// The executor's CPU streams spin before they block, long enough to catch their events
// where their waits keep ending soon (executor/cpu/spin_wait.h: AdaptiveSpin); pipeline
// transfer streams block at once.
TEST(SimulatorEngine, AStreamThatCatchesItsEventsSpinningNeedsNoWakeUp) {
  // Two cores. The compute stream runs ten 0.1 s ops; op k of the other stream (1 ms) waits
  // for compute op k, so its thread waits about 0.1 s each time: longer than the short spin
  // (0.02 s), within the long one (0.2 s). The first six waits block and are woken
  // (event_latency, 0.01 s); from then on the thread spins long enough and sees each
  // event spin_latency (0.001 s) after it.
  for (StreamType stream : {StreamType::kMpComm, StreamType::kPpSend}) {
    GraphBuilder b(1);
    std::vector<int> waiters;
    for (int k = 0; k < 10; ++k) {
      int op = b.Compute(0, 0.1);
      waiters.push_back(b.Add(0, stream, InstrKind::kCompute, 1e-3, {op}));
    }
    DeviceSpec d = Cores(2);
    d.set_event_latency(0.01);
    d.set_spin_budget(0.02);
    d.set_long_spin_budget(0.2);
    d.set_spin_latency(1e-3);
    auto r = Simulate(b.graph(), d);
    ASSERT_TRUE(r.ok());
    const bool spins = stream == StreamType::kMpComm;
    for (int k = 0; k < 10; ++k) {
      const double latency = spins && k >= 6 ? 1e-3 : 0.01;
      EXPECT_NEAR(r->timeline[waiters[k]].start, 0.1 * (k + 1) + latency, 1e-9)
          << StreamTypeName(stream) << " wait " << k;
    }
    EXPECT_EQ(r->stream_waits, spins ? 6 : 10);
    d.set_spin_budget(0);  // a table without the spin: every wait blocks
    auto blocking = Simulate(b.graph(), d);
    ASSERT_TRUE(blocking.ok());
    EXPECT_EQ(blocking->stream_waits, 10);
  }
}

TEST(SimulatorEngine, ASpinningThreadSeesItsEventOnItsTurnAmongTheRunnableThreads) {
  // One core. Rank 0's mp_comm op waits for its compute op, its thread spinning all along
  // (a 1 s spin). Alone on the node, the compute op ends at 0.1 s and the spinner, the one
  // runnable thread, sees it spin_latency (0.01 s) later. Beside rank 1's long op the
  // compute op ends at 0.2 s, and two threads (rank 1's and the spinner) take turns on the
  // core: twice the latency.
  for (bool beside : {false, true}) {
    GraphBuilder b(2);
    const int op = b.Compute(0, 0.1);
    const int waiter = b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 1e-3, {op});
    if (beside) b.Compute(1, 10.0);
    DeviceSpec d = Cores(1);
    d.set_event_latency(0.5);
    d.set_spin_budget(1.0);
    d.set_long_spin_budget(1.0);
    d.set_spin_latency(0.01);
    auto r = Simulate(b.graph(), d);
    ASSERT_TRUE(r.ok());
    EXPECT_NEAR(r->timeline[waiter].start, beside ? 0.2 + 0.02 : 0.1 + 0.01, 1e-9);
    EXPECT_EQ(r->stream_waits, 0);
  }
}

TEST(SimulatorEngine, AWaitCaughtSpinningCostsTheNodeItsShareOfTheSpin) {
  // One core. Rank 0's mp_comm op (1 ms) waits for its compute op (0.1 s), its thread
  // spinning all along and seeing the event at once; rank 1 runs a 1 s op beside. The core
  // does 1.101 s of work; the spinner took spin_cpu_share (0.25) of the 0.2 s it spun
  // (the compute op shared the core), 0.05 s, so rank 1's op ends that much later. A wait
  // that blocks costs wait_cpu instead, and streams waiting on a device nothing.
  GraphBuilder b(2);
  const int op = b.Compute(0, 0.1);
  const int waiter = b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 1e-3, {op});
  const int beside = b.Compute(1, 1.0);
  DeviceSpec d = Cores(1);
  d.set_spin_budget(1.0);
  d.set_long_spin_budget(1.0);
  d.set_spin_latency(0);
  auto uncharged = Simulate(b.graph(), d);
  ASSERT_TRUE(uncharged.ok()) << uncharged.status().message();
  EXPECT_NEAR(uncharged->timeline[waiter].start, 0.2, 1e-9);
  EXPECT_NEAR(uncharged->timeline[beside].end, 1.101, 1e-9);
  EXPECT_EQ(uncharged->stream_waits, 0);
  d.set_spin_cpu_share(0.25);
  auto charged = Simulate(b.graph(), d);
  ASSERT_TRUE(charged.ok()) << charged.status().message();
  EXPECT_NEAR(charged->timeline[beside].end, 1.151, 1e-9);
  EXPECT_EQ(charged->stream_waits, 0);
  d.set_spin_budget(0);  // every wait blocks: woken, not caught
  d.set_long_spin_budget(0);
  auto blocked = Simulate(b.graph(), d);
  ASSERT_TRUE(blocked.ok()) << blocked.status().message();
  EXPECT_NEAR(blocked->timeline[beside].end, 1.101, 1e-9);
  EXPECT_EQ(blocked->stream_waits, 1);
  d.set_spin_budget(1.0);
  d.set_long_spin_budget(1.0);
  d.set_cores_per_node(0);  // streams waiting on a device: no CPU taken
  auto gpu = Simulate(b.graph(), d);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  EXPECT_NEAR(gpu->timeline[beside].end, 1.0, 1e-9);
}

TEST(SimulatorEngine, AThreadResumingOnACoreThatComputeHoldsWaitsForIt) {
  // One core. Rank 0's compute stream runs A (0.1 s), B (0.3 s), C (0.2 s); its mp_comm op
  // waits for A from the step's start. When A ends B starts at once and holds the core: the
  // waiter runs once the compute thread waits, after C (0.6 s), or when the scheduler gives
  // it the core: after held_spin_latency, or held_wake_factor times the CPU it used since it
  // last slept (its spin: 0.1 s spinning, the 0.05 s spin before it blocked), whichever
  // comes first. Where C waits for the mp_comm op the compute thread waits after B (0.4 s).
  // Without the held figures (tables written before) a spinner takes its turn among the two
  // runnable threads (2 x spin_latency) and a woken thread event_latency.
  struct Case {
    bool c_waits;
    double spin_budget, held_spin_latency, held_wake_factor, seen;
  };
  for (const Case& c : {Case{false, 1.0, 1.0, 100, 0.6}, Case{false, 1.0, 0.25, 100, 0.35},
                        Case{true, 1.0, 1.0, 100, 0.4}, Case{false, 1.0, 1.0, 2, 0.1 + 0.2},
                        Case{false, 0.05, 1.0, 2, 0.1 + 0.1}, Case{false, 1.0, 0, 0, 0.12},
                        Case{false, 0.05, 0, 0, 0.1 + 0.001}}) {
    GraphBuilder b(1);
    const int a = b.Compute(0, 0.1);
    b.Compute(0, 0.3);
    const int waiter = b.Add(0, StreamType::kMpComm, InstrKind::kCompute, 1e-3, {a});
    b.Compute(0, 0.2, c.c_waits ? std::vector<int>{waiter} : std::vector<int>{});
    DeviceSpec d = Cores(1);
    d.set_event_latency(0.001);
    d.set_spin_budget(c.spin_budget);
    d.set_long_spin_budget(c.spin_budget);
    d.set_spin_latency(0.01);
    d.set_held_spin_latency(c.held_spin_latency);
    d.set_held_wake_factor(c.held_wake_factor);
    auto r = Simulate(b.graph(), d);
    ASSERT_TRUE(r.ok());
    EXPECT_NEAR(r->timeline[waiter].start, c.seen, 1e-9)
        << "C waits: " << c.c_waits << ", spin " << c.spin_budget << ", held "
        << c.held_spin_latency << ", factor " << c.held_wake_factor;
    EXPECT_EQ(r->stream_waits, c.spin_budget < 0.1 ? 1 : 0);
  }
}

TEST(SimulatorEngine, ShortTransfersLateInALongStepFinish) {
  // After 1e5 s of compute a double resolves about 1.5e-11 s, and a microsecond transfer's
  // end rounds: what is left of its work lasts less than that resolution. Transfers of many
  // lengths overlap, and the receivers' compute beside them changes rates as they end. The
  // simulation must finish (the test's time limit catches a loop that stops progressing).
  constexpr double kLong = 1e5;
  constexpr int kTransfers = 200;
  GraphBuilder b(4);
  const int head[2] = {b.Compute(0, kLong), b.Compute(2, kLong)};
  std::vector<std::pair<int, double>> recvs;
  for (int k = 0; k < kTransfers; ++k) {
    const int pair = k % 2;
    const double seconds = 1e-6 * (1 + 0.37 * (k % 7) + 0.013 * k);
    auto [send, recv] = b.Transfer(2 * pair, 2 * pair + 1, seconds, {head[pair]});
    b.Compute(2 * pair + 1, 3.1e-7 * (1 + k % 5), {recv});
    recvs.push_back({recv, seconds});
    (void)send;
  }
  auto r = Simulate(b.graph(), Cores(0, 0.3));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->step_time, kLong);
  EXPECT_LT(r->step_time, kLong + 1e-3);
  // Every send posts when its head ends; the transfers of a pair share its link, so each
  // data arrives no sooner than its own time and no later than all of them together.
  double total[2] = {0, 0};
  for (int k = 0; k < kTransfers; ++k) total[k % 2] += recvs[k].second;
  for (int k = 0; k < kTransfers; ++k) {
    const double end = r->timeline[b.graph().instrs[recvs[k].first].partner].end;
    EXPECT_GE(end, kLong + recvs[k].second - 1e-10);
    EXPECT_LE(end, kLong + total[k % 2] + 1e-10);
  }
}

TEST(SimulatorEngine, RejectsNegativeCosts) {
  GraphBuilder b(1);
  b.Compute(0, -1.0);
  auto r = Simulate(b.graph(), Cores(0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("invalid cost"), std::string::npos);
}

}  // namespace
}  // namespace pw::cost
