#pragma once
// The op-level multi-stream simulator: replays a SimGraph (every rank's streams) in
// simulated time. A stream runs its instructions in order; an instruction starts once
// the instructions it depends on have finished (plus the device's event latency when they
// ran on another stream or rank) and the host has issued it (launch overhead per op).
//
// Communication: a send posts and frees its stream at once (eager, as the executor's
// sends return before delivery); the transfer starts then (or, with rendezvous p2p, once
// the recv is posted too) and the recv finishes when it has arrived. A collective starts
// when every member of its group has reached it and finishes for all at once.
//
// Sharing: work progresses at a rate. Compute slows by the device's overlap_slowdown while
// communication of the same rank runs beside it (overlap is not free). On a device with
// cores_per_node > 0 (the CPU), the ranks of a node share its cores: with D runnable
// threads (a compute instruction counts one, a GEMM its BLAS threads, a running transfer or
// collective what it keeps of a core on each member: its measured CPU per operation over
// its time, else the device's comm_threads), compute runs at the rate the device measured
// for D busy threads (thread_rate, which holds other users' share of the machine; else
// min(1, C/D)). With cores_in_turns (the built-in cpu spec, so every profile's table) the
// cores communication leaves are not shared evenly but taken in turns (core_turns.h): a
// thread that holds a core runs its ops at full speed until its stream blocks or its slice
// ends while another waits, and the others queue for one, as the executor's rank
// processes take them. Communication takes the time measured for it inside a short run of a plan
// (pipeweave profile --comm), which holds the wake-ups and the spinning of the transport
// on busy cores; a collective also waits for its measured straggle (ranks on shared
// cores reach it apart, which equal simulated ranks never do), except on a compute stream
// of a node whose ranks' threads outnumber its cores: there the member that waits gives
// its core to the late one, so the even sharing stands for most of their taking turns
// (adding all the straggle counted it twice: the small and large GPTs' mp 2 x pp 2 plans on
// 4 processes sharing 2 cores were priced 10-16 % slow; none of it, 4-14 % fast), and such
// a collective waits the share of it the device measured (turn_straggle, fitted by
// profile --comm on its measuring runs); nor on a communication stream
// whose members' threads were all running when their events came (see the spin below),
// unless a member's rank computes beside the collective (an overlap pass's plan): its
// thread then competes with that compute for the shared cores and the members reach it
// apart (without that, the demo's overlap-1f1b plan on 4 processes sharing 2 cores was
// priced 18 % fast while the plain overlap plan was right).
// Blocked threads must be woken: while every core is busy, an instruction that waited on
// another rank starts busy_wake_latency later, and communication measured under a number
// of busy cores is priced with the fits nearest that load. Each such wait also costs the
// node wait_cpu of CPU (the spin before blocking, the sleep and the wake-up), taken from
// its cores beside the ranks' work: plans that hand work between streams more often (the
// overlap passes) burn more of the cores the ranks share. A pipeline transfer costs its
// node transfer_cpu (DeviceSpec, measured by profile) the same way, half where the send
// starts on the sender's node (its stream's wake-up included: no wait_cpu for it) and half
// where the recv ends on the receiver's; its communication then keeps no core while it
// runs (its cpu_per_op, a residual of a whole run, swung from 0 to 90 us between profiles
// of one plan). The executor's CPU streams spin
// before they block (DeviceSpec.spin_budget; long_spin_budget while a stream's recent
// waits ended within it, as its AdaptiveSpin learns): an event of another stream of the
// rank that comes while its waiter still spins is seen spin_latency after it (times the
// node's runnable threads, spinners included, over its cores: the spinner sees it on its
// turn), with no wake-up and no wait_cpu; its node loses spin_cpu_share of the time it spun
// (the turns the spinner took from the others: the small GPT's plain overlap plan on 4
// processes sharing 2 cores catches ~600 events a step, 85 us of spin and ~5 us of CPU each
// where the spinner shared its core; priced without it, the plan came out 8-21 % fast); one
// that comes later costs event_latency and a wake-up. Such a resume is priced once the
// instructions of its instant have started: where they then hold every core of the node (a
// rank's compute runs on past the event, as the overlap passes' plans do), the thread
// shares a core with one that keeps computing and runs when the first computing thread of
// the node waits (its op ends and its stream's next one waits for another stream), after
// held_wake_factor times the CPU it used since it last slept (the scheduler owes the core
// sooner to a thread that ran less), or after held_spin_latency (the turn of one that spins
// all along), whichever comes first; the three profiled (~1.0 and ~2 ms on a 2-core VM).
// Where the node's cores are taken in turns, a compute op the thread resumes to queues for
// its core there instead (priced both ways, the small GPT's overlap-1f1b plan came out
// 1.22-1.31x its 1f1b plan's step against 1.10-1.25x measured; 1.18-1.21x queued once).
// Without that the overlap-1f1b plan's hand-offs to its communication streams came out 3x
// faster than measured on 4 processes sharing 2 cores, and on a 1 Gbit link (woken threads:
// median 38 us, mean 405-482 us, a tenth above 1.5 ms) its B/A 0.73 against 0.82.
//
// A graph of several steps (RepeatSteps) runs them back to back: a rank's host issues its
// next step once its own streams have finished the last, as the executor does, so ranks
// that end a step apart start the next apart (SimOptions::steps: the steady step).
//
// Reports the step time, per-rank and per-stream busy time, exposed communication
// (communication of a rank while none of its compute runs), bubble (time a rank's compute
// is idle) and the peak bytes per rank from the tensors' lifetimes: a tensor is allocated
// when its first writer starts and freed when its last use finishes; parameters,
// optimizer state and gradient accumulators are held all step.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "cost_model/estimator.h"
#include "simulator/sim_graph.h"

namespace pw::cost {

struct SimOptions {
  bool rendezvous_p2p = false;  // transfers wait for the recv to be posted
  bool record_timeline = true;  // keep per-instruction times (traces, SVG)
  // Threads a GEMM keeps busy (BLAS threads; other ops one); 0: the cost table's
  // blas_threads (1 when it has none).
  int compute_threads = 0;
  // Runtime cost added to every compute instruction; < 0: the device's op_overhead.
  double op_overhead = -1;
  // Weight-gradient GEMMs add into the gradient sums, as the executor runs them; false: an
  // add per gradient and micro-batch, as the sequential reference runner sums them.
  bool fuse_grad_accumulation = true;
  // Steps back to back (RepeatSteps) for the steady step (SimResult::steady_step_time):
  // Simulator::Run simulates them beside the one step when > 1; RunSteady needs >= 2.
  int steps = 1;
};

struct InstrTime {
  double start = -1;   // reached the head of its stream with its dependencies met
  double active = -1;  // its work (or transfer) began
  double end = -1;
};

struct RankResult {
  int rank = 0;
  std::array<double, kNumStreamTypes> busy{};  // seconds each stream ran work
  double compute_busy = 0;                     // union of the rank's compute
  double comm_busy = 0;                        // union of the rank's communication
  double exposed_comm = 0;  // communication with no compute of the rank beside it
  // Exposed communication split by what it is for (CommClass; kNone stays 0). The classes
  // may overlap each other, so they can add up to more than exposed_comm.
  std::array<double, kNumCommClasses> exposed_by_class{};
  double bubble = 0;     // step time minus compute_busy
  double end = 0;        // when its last instruction finished
  int stream_waits = 0;  // times a stream's thread waited for another stream's or rank's event
  // On a CPU device (cores_per_node > 0) whose ops run on one kernel thread, the core time
  // the rank's threads used over the simulated steps: its ops, its waits' and spins' CPU,
  // its share of communication; else 0.
  double cpu = 0;
  int64_t peak_bytes = 0;
  int64_t persistent_bytes = 0;
};

struct SimResult {
  double step_time = 0;
  // When each step of the graph ended (one entry unless it was RepeatSteps'): the latest
  // end of its instructions on any rank.
  std::vector<double> step_ends;
  // Simulator::Run with SimOptions::steps > 1: the time a step takes once steps follow each
  // other, (last step's end - first step's end) / (steps - 1); 0 when not simulated.
  double steady_step_time = 0;
  int steady_steps = 0;  // the steps it was simulated over
  // What a run of many steps measures a step to take: the steady step where simulated,
  // else the one step's time.
  double StepTimeInRun() const { return steady_steps > 1 ? steady_step_time : step_time; }
  // Idle compute time over all ranks: sum(bubble) / (ranks * step_time).
  double bubble_rate = 0;
  double exposed_comm = 0;  // the largest of the ranks'
  int stream_waits = 0;     // over all ranks (RankResult::stream_waits)
  double cpu = 0;           // over all ranks (RankResult::cpu)
  double steady_cpu = 0;    // the steady steps' core time over their number, where simulated
  // The simulated steps' core time over their number.
  double CpuPerStep() const {
    return step_ends.empty() ? 0 : cpu / static_cast<double>(step_ends.size());
  }
  // A step's core time over all ranks, as a run's step_cpu_ms sums its rank processes'.
  double CpuInRun() const { return steady_steps > 1 ? steady_cpu : CpuPerStep(); }
  // The largest of the ranks', key by key (each key may come from another rank).
  std::array<double, kNumStreamTypes> busy_by_stream{};
  std::array<double, kNumCommClasses> exposed_by_class{};
  std::vector<RankResult> ranks;
  // Estimated seconds of work by estimate path (table, interpolated, roofline, comm), over
  // every instruction of every rank: how much of the prediction rests on measurements.
  std::array<double, kNumEstimatePaths> path_seconds{};
  std::vector<InstrTime> timeline;  // per instruction of the graph, when recorded
};

// With `comm`, transfers and collectives are priced when they start, under the load of
// their node (CommModel::Time's busy_cores); without, they take their SimInstr::seconds.
StatusOr<SimResult> Simulate(const SimGraph& graph, const DeviceSpec& device,
                             const SimOptions& options = {}, const CommModel* comm = nullptr);

// The service passes reach through PassContext: prices a module's plan.
class Simulator {
 public:
  Simulator(std::shared_ptr<const Estimator> estimator, const OpRegistry& registry,
            SimOptions options = {})
      : estimator_(std::move(estimator)), registry_(registry), options_(options) {}

  StatusOr<SimResult> Run(const Module& module) const;
  // Also returns the lowered graph (for traces and drawings).
  StatusOr<SimResult> Run(const Module& module, SimGraph* graph) const;
  // Only the options' steps (>= 2) back to back, for callers that need the steady step and
  // not the one step's own figures (half the work of Run with steps = 2): step_time is the
  // first step's end, busy times, exposure, bubble and stream waits are over all the steps,
  // peaks are per step (a rank's steps never overlap).
  StatusOr<SimResult> RunSteady(const Module& module) const;
  const Estimator& estimator() const { return *estimator_; }
  const SimOptions& options() const { return options_; }

 private:
  std::shared_ptr<const Estimator> estimator_;
  const OpRegistry& registry_;
  // The options with compute_threads resolved (the cost table's BLAS threads when unset).
  SimOptions Resolved() const;
  // The lowering's options: the runtime's (SimOptions) and whether to fold replicas.
  SimGraphOptions GraphOptions(bool fold_replicas) const;

  SimOptions options_;
};

}  // namespace pw::cost
