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
// an op from one profile to the next.
constexpr int kSteps = 21;
constexpr int kRounds = 3;

// The steps after each run's first (which warms caches and allocators up).
void AddSteadySteps(std::vector<double> run_ms, std::vector<double>& steady_ms) {
  if (!run_ms.empty()) run_ms.erase(run_ms.begin());
  steady_ms.insert(steady_ms.end(), run_ms.begin(), run_ms.end());
}

double MedianSeconds(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0 : ms[ms.size() / 2] * 1e-3;
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
  cost::SimOptions sim_options;
  sim_options.op_overhead = 0;
  sim_options.record_timeline = false;
  cost::Simulator simulator(estimator, ops::Registry(), sim_options);
  cost::SimGraph graph;
  PW_ASSIGN_OR_RETURN(cost::SimResult kernels, simulator.Run(planned, &graph));
  const double num_ops = static_cast<double>(graph.instrs.size());
  // The reference runner adds each micro-batch's gradients itself (as sim --runtime
  // reference prices it): those kernels and ops beside the executor's.
  cost::SimOptions reference_options = sim_options;
  reference_options.fuse_grad_accumulation = false;
  cost::Simulator reference_simulator(estimator, ops::Registry(), reference_options);
  cost::SimGraph reference_graph;
  PW_ASSIGN_OR_RETURN(cost::SimResult reference_kernels,
                      reference_simulator.Run(planned, &reference_graph));
  const double reference_ops = static_cast<double>(reference_graph.instrs.size());

  std::vector<double> reference_steps_ms, executor_steps_ms;
  for (int round = 0; round < kRounds; ++round) {
    ReferenceOptions reference;
    reference.steps = kSteps;
    reference.micro_batches = kMicroBatches;
    PW_ASSIGN_OR_RETURN(ReferenceResult ref, RunReference(module, reference));
    AddSteadySteps(ref.step_time_ms, reference_steps_ms);

    std::vector<double> exec_ms;
    RankRunOptions run;
    run.steps = kSteps;
    run.micro_batches = kMicroBatches;
    run.on_step = [&](const RankStepReport& r) { exec_ms.push_back(r.step_ms); };
    PW_RETURN_IF_ERROR(RunRank(module, nullptr, run));
    AddSteadySteps(exec_ms, executor_steps_ms);
  }

  RuntimeOverheads out;
  out.ops = num_ops;
  out.kernels_ms = kernels.step_time * 1e3;
  out.reference_ms = MedianSeconds(reference_steps_ms) * 1e3;
  out.executor_ms = MedianSeconds(executor_steps_ms) * 1e3;
  // A runtime can come out below the profiled kernels (noise, or kernels warmer than the
  // profiler leaves them: on this tiny GPT the executor often runs faster than their sum):
  // no negative overheads.
  out.executor = std::max(0.0, (out.executor_ms - out.kernels_ms) * 1e-3 / num_ops);
  // The reference runner's against the executor's, both running the same kernels the same
  // way: what the reference takes beyond the executor, less the gradient additions it runs
  // on top, is its extra per op. Measured against the profiled kernels instead, it took their
  // error in too (0.24 us an op where the two runtimes' difference says 0.5-0.7).
  const double extra_ms =
      out.reference_ms - out.executor_ms - (reference_kernels.step_time - kernels.step_time) * 1e3;
  out.reference = std::max(0.0, (out.executor * num_ops + extra_ms * 1e-3) / reference_ops);
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
