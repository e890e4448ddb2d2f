#include "tools/runtime_calibration.h"

#include <algorithm>
#include <deque>
#include <thread>
#include <vector>

#include "cost_model/wake_latency.h"
#include "executor/cpu/cpu_event.h"
#include "executor/rank_runner.h"
#include "executor/reference_runner.h"
#include "executor/sequential_plan.h"
#include "ir/thread_cpu_clock.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw::tools {
namespace {

constexpr int kMicroBatches = 4;
// Steps of a run, and runs of each runtime, alternated: a step takes well under a
// millisecond, and one run of 9 steps put the reference's overhead anywhere in 0.43-0.64 us
// an op from one profile to the next. Each runtime's fastest round is taken: on a 2-vCPU VM
// the executor's median over 3 rounds came out 0.47-0.79 ms a step from one profile to the
// next (an overhead of 0-0.52 us an op) while its kernels summed 0.52 ms.
constexpr int kSteps = 21;
constexpr int kRounds = 6;

// The steps after each run's first (which warms caches and allocators up).
void AddSteadySteps(std::vector<double> run_ms, std::vector<double>& steady_ms) {
  if (!run_ms.empty()) run_ms.erase(run_ms.begin());
  steady_ms.insert(steady_ms.end(), run_ms.begin(), run_ms.end());
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// The simulated step of `planned`'s kernels alone (no runtime overhead), as the executor
// runs them and as the reference runner does (each micro-batch's gradients added by
// itself), and their op counts.
struct KernelSteps {
  double executor_seconds = 0, reference_seconds = 0;
  double executor_ops = 0, reference_ops = 0;
};
StatusOr<KernelSteps> SimulateKernels(const Module& planned,
                                      std::shared_ptr<const cost::Estimator> estimator) {
  cost::SimOptions options;
  options.op_overhead = 0;
  options.record_timeline = false;
  KernelSteps out;
  for (bool reference : {false, true}) {
    options.fuse_grad_accumulation = !reference;
    cost::Simulator simulator(estimator, ops::Registry(), options);
    cost::SimGraph graph;
    PW_ASSIGN_OR_RETURN(cost::SimResult step, simulator.Run(planned, &graph));
    (reference ? out.reference_seconds : out.executor_seconds) = step.step_time;
    (reference ? out.reference_ops : out.executor_ops) = static_cast<double>(graph.instrs.size());
  }
  return out;
}

// The median steady step (ms) of the reference runner and of the executor on `module`'s
// sequential plan, runs of `steps` alternated `rounds` times, and the median over the rounds
// of the one's round over the other's (a slow spell of the machine meets both runs of a
// round alike). threads > 0: both on that many kernel threads; 0: the reference's default,
// and the executor on what it leaves.
struct RuntimeSteps {
  double reference_ms = 0, executor_ms = 0;
  double ratio = 0;  // reference over executor
  // The fastest round's median step of each.
  double fastest_reference_ms = 0, fastest_executor_ms = 0;
};
StatusOr<RuntimeSteps> TimeRuntimes(const Module& module, int micro_batches, int steps, int rounds,
                                    int threads) {
  std::vector<double> reference_steps_ms, executor_steps_ms, ratios;
  RuntimeSteps out;
  auto faster = [](double& fastest, double ms) {
    if (ms > 0 && (fastest == 0 || ms < fastest)) fastest = ms;
  };
  for (int round = 0; round < rounds; ++round) {
    ReferenceOptions reference;
    reference.steps = steps;
    reference.micro_batches = micro_batches;
    if (threads > 0) reference.threads = threads;
    PW_ASSIGN_OR_RETURN(ReferenceResult ref, RunReference(module, reference));
    std::vector<double> ref_ms;
    AddSteadySteps(ref.step_time_ms, ref_ms);

    if (threads > 0) ops::SetKernelThreads(threads);
    std::vector<double> exec_ms;
    RankRunOptions run;
    run.steps = steps;
    run.micro_batches = micro_batches;
    run.on_step = [&](const RankStepReport& r) { exec_ms.push_back(r.step_ms); };
    PW_RETURN_IF_ERROR(RunRank(module, nullptr, run));
    if (!exec_ms.empty()) exec_ms.erase(exec_ms.begin());  // its first warms caches up
    if (const double exec = Median(exec_ms); exec > 0) ratios.push_back(Median(ref_ms) / exec);
    faster(out.fastest_reference_ms, Median(ref_ms));
    faster(out.fastest_executor_ms, Median(exec_ms));
    reference_steps_ms.insert(reference_steps_ms.end(), ref_ms.begin(), ref_ms.end());
    executor_steps_ms.insert(executor_steps_ms.end(), exec_ms.begin(), exec_ms.end());
  }
  out.reference_ms = Median(reference_steps_ms);
  out.executor_ms = Median(executor_steps_ms);
  out.ratio = Median(ratios);
  return out;
}

}  // namespace

StatusOr<RuntimeOverheads> CalibrateRuntimes(const cost::ProfileOptions& options) {
  models::GptConfig config;
  config.layers = 2;
  config.hidden = 16;
  config.heads = 2;
  config.ffn = 32;
  config.seq = 8;
  config.vocab = 32;
  PW_ASSIGN_OR_RETURN(Module module, models::BuildGpt(config));
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline("append-backward{optimizer=adam}"));
  PW_RETURN_IF_ERROR(pm.Run(module).status());
  PW_ASSIGN_OR_RETURN(Module planned, WithSequentialPlan(module, kMicroBatches));

  // The kernels alone, as the simulator adds them up.
  PW_ASSIGN_OR_RETURN(std::vector<cost::CostedOp> ops, cost::DistinctOps(planned, ops::Registry()));
  cost::ProfileOptions quiet = options;
  quiet.measure_device = false;
  quiet.progress = nullptr;
  quiet.cache = cost::CacheState::kHot;  // its whole state fits in L2: every op finds it there
  PW_ASSIGN_OR_RETURN(cost::ProfileResult profiled, cost::ProfileOps(ops, quiet));
  PW_ASSIGN_OR_RETURN(cost::DeviceSpec device, cost::BuiltinDeviceSpec("cpu"));
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      cost::Estimator::Create(device, std::move(profiled.table)));
  PW_ASSIGN_OR_RETURN(KernelSteps kernels, SimulateKernels(planned, estimator));
  PW_ASSIGN_OR_RETURN(RuntimeSteps runs,
                      TimeRuntimes(module, kMicroBatches, kSteps, kRounds, /*threads=*/0));

  RuntimeOverheads out;
  out.ops = kernels.executor_ops;
  out.kernels_ms = kernels.executor_seconds * 1e3;
  out.reference_ms = runs.fastest_reference_ms;
  out.executor_ms = runs.fastest_executor_ms;
  // A runtime can come out below the profiled kernels (noise, or kernels warmer than the
  // profiler leaves them: on this tiny GPT the executor often runs faster than their sum):
  // no negative overheads.
  out.executor = std::max(0.0, (out.executor_ms - out.kernels_ms) * 1e-3 / out.ops);
  // The reference runner's: the executor's, plus what the reference takes beyond the
  // executor, less the gradient additions it runs on top, over its ops. Both run the same
  // kernels the same way; measured against the profiled kernels instead, it took their
  // error in too (0.24 us an op where the two runtimes' difference says 0.5-0.7).
  const double extra_ms = out.reference_ms - out.executor_ms -
                          (kernels.reference_seconds - kernels.executor_seconds) * 1e3;
  out.reference = std::max(
      0.0, (out.executor * kernels.executor_ops + extra_ms * 1e-3) / kernels.reference_ops);
  return out;
}

StatusOr<ReferenceCalibration> CalibrateReferenceOn(const Module& module, int micro_batches,
                                                    int threads, const cost::OpCostTable& table,
                                                    double executor_overhead) {
  PW_ASSIGN_OR_RETURN(Module planned, WithSequentialPlan(module, micro_batches));
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      cost::Estimator::Create(table.proto().device_spec(), table));
  PW_ASSIGN_OR_RETURN(KernelSteps kernels, SimulateKernels(planned, estimator));
  // Runs of about a fifth of a second each (a large model's: the least that leaves two
  // steady steps), alternated five times, or three where that takes over two seconds: the
  // machine's speed moves over seconds.
  const double step_seconds = std::max(kernels.executor_seconds, 1e-6);
  const int steps = static_cast<int>(std::clamp(0.2 / step_seconds + 1.0, 3.0, double{kSteps}));
  const int rounds = 2.0 / (2 * steps * step_seconds) >= 5 ? 5 : 3;
  PW_ASSIGN_OR_RETURN(RuntimeSteps runs,
                      TimeRuntimes(module, micro_batches, steps, rounds, threads));
  // The reference priced at its measured ratio to the executor times what sim prices the
  // executor: a spell slows both runs of a round, and their difference with them.
  const double executor_step = kernels.executor_seconds + executor_overhead * kernels.executor_ops;
  ReferenceCalibration out;
  out.reference = std::max(
      0.0, (runs.ratio * executor_step - kernels.reference_seconds) / kernels.reference_ops);
  out.ratio = runs.ratio;
  out.rounds = rounds;
  out.ops = kernels.reference_ops;
  out.executor_ms = runs.executor_ms;
  out.reference_ms = runs.reference_ms;
  out.steps = rounds * (steps - 1);
  return out;
}

namespace {

// The players sit on two different cores, each beside a busy thread: a wake-up crosses
// cores, as most of a run's do (on one core a hand-off is a plain switch, ~4 us here, and
// unpinned threads measured either figure depending on where the scheduler put them).
double WaitCpuOnce(const std::vector<int>& cpus, int turns) {
  // Events are used once each, so that no reset races a late waiter.
  std::deque<cpu::CpuEvent> to_a(turns), to_b(turns);
  cost::BusyThreads busy(cpus);
  // A turn's work, a few microseconds, and the CPU outside it.
  auto work = [] { cost::BurnCpu(2000); };
  std::vector<double> overhead(2, 0);
  auto player = [&](int me) {
    cost::PinThisThread(cpus[me % cpus.size()]);
    std::deque<cpu::CpuEvent>& mine = me == 0 ? to_a : to_b;
    std::deque<cpu::CpuEvent>& theirs = me == 0 ? to_b : to_a;
    double inside = 0;
    const double begin = ThreadCpuSeconds();
    for (int t = 0; t < turns; ++t) {
      if (me == 1 || t > 0) mine[me == 0 ? t - 1 : t].Wait(cpu::SpinPolicy::kSpinFirst);
      const double w = ThreadCpuSeconds();
      work();
      inside += ThreadCpuSeconds() - w;
      theirs[t].Record();
    }
    if (me == 0) mine[turns - 1].Wait(cpu::SpinPolicy::kSpinFirst);
    overhead[me] = ThreadCpuSeconds() - begin - inside;
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  return (overhead[0] + overhead[1]) / (2.0 * turns);
}

}  // namespace

double MeasureWaitCpu(int cores, int turns) {
  std::vector<int> cpus = cost::AllowedCpus();
  if (cpus.empty()) cpus.push_back(0);
  if (static_cast<int>(cpus.size()) > cores) cpus.resize(std::max(cores, 1));
  // Hand-offs on busy cores come in bursts of slow and fast ones: the median of rounds.
  constexpr int kRounds = 5;
  std::vector<double> rounds;
  for (int r = 0; r < kRounds; ++r) rounds.push_back(WaitCpuOnce(cpus, turns));
  std::sort(rounds.begin(), rounds.end());
  return rounds[kRounds / 2];
}

}  // namespace pw::tools
