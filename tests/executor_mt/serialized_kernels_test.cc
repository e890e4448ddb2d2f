// What `profile --in-run` changes in a run: every traced step reaches on_traced_step with
// each kernel's times (its stream thread's CPU time among them), and compute kernels run one
// at a time across the ranks (cpu::SerializeComputeKernels) without changing a bit of what
// the step computes, nor deadlocking the all-reduces and sends that wait for peers.

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "equivalence_util.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/interpreter.h"
#include "models/gpt.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 3;

Module Planned() {
  auto built = models::BuildGpt(SmallGptConfig(2, 2));
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto planned = WithPasses(std::move(built).value(),
                            "append-backward{optimizer=adam,lr=0.01},split-program,"
                            "schedule{kind=1f1b,micro-batches=4},insert-p2p");
  EXPECT_TRUE(planned.ok()) << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

struct Traced {
  LocalRunResult run;
  int traced_steps = 0;   // on_traced_step calls, over ranks
  int kernels_timed = 0;  // kernel instructions with a CPU time, over ranks and steps
};

Traced Train(const Module& module, bool serialize) {
  std::atomic<int> calls{0}, timed{0};
  RankRunOptions o;
  o.steps = kSteps;
  o.data.data_seed = 1;
  o.traced_steps = kSteps;
  o.trace_cpu_time = true;  // as profile --in-run times kernels at one BLAS thread
  o.on_traced_step = [&](const Interpreter& interp) {
    ++calls;
    for (const Instr& instr : interp.lowered().instrs)
      if (instr.kind == Instr::Kind::kKernel && instr.times.began >= interp.step_began_ns() &&
          instr.times.cpu > 0)
        ++timed;
    return OkStatus();
  };
  cpu::SerializeComputeKernels(serialize);
  StatusOr<LocalRunResult> run = RunLocalRanks(module, o);
  cpu::SerializeComputeKernels(false);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return {run.ok() ? std::move(run).value() : LocalRunResult{}, calls.load(), timed.load()};
}

TEST(SerializedKernelsTest, EveryTracedStepReportedAndTheBitsUnchanged) {
  const Module module = Planned();
  ASSERT_FALSE(module.plan.empty());
  const Traced free = Train(module, false);
  const Traced serial = Train(module, true);
  const int ranks = module.mesh.world_size();
  EXPECT_EQ(free.traced_steps, kSteps * ranks);
  EXPECT_EQ(serial.traced_steps, kSteps * ranks);
  EXPECT_GT(serial.kernels_timed, 100 * kSteps);
  ASSERT_EQ(free.run.Losses().size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step)
    EXPECT_EQ(free.run.Losses()[step], serial.run.Losses()[step]) << "step " << step;
  for (int rank = 0; rank < ranks; ++rank)
    for (const auto& [name, value] : free.run.params[rank]) {
      auto it = serial.run.params[rank].find(name);
      ASSERT_NE(it, serial.run.params[rank].end()) << name;
      EXPECT_TRUE(SameBits(value, it->second)) << "rank " << rank << ": " << name;
    }
}

}  // namespace
}  // namespace pw::testing
