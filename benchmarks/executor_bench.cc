// Executor overheads on the CPU backend.
//
//   BM_DispatchOneStream: 1,000,000 tiny ops queued on one stream per step; the figure is
//     wall time per op (host enqueue + worker run + slot release). Target: <= 1 us.
//   BM_PingPongTwoStreams: ops alternate between two streams, each waiting on the event
//     the previous one recorded; the figure is wall time per hop. Target: <= 5 us.
//
//   build-exec/benchmarks/executor_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
//   BM_GptStep/<model>/<schedule>: one training step of GPT (mp=2, pp=2: four ranks as
//     threads over the in-process transport) per schedule; the time is the median step
//     (slowest rank) of steps 2-4, the counters the peak bytes of each rank.
//     small: 4 layers, hidden 64, 4 heads, seq 16, vocab 128, micro-batch 2, 8 micro-batches
//     large: 8 layers, hidden 512, 8 heads, same otherwise
//   `pipeweave run-parallel FILE --nproc 4 --report json` measures the same over Gloo.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "executor/cpu/cpu_backend.h"
#include "executor/interpreter.h"
#include "executor/local_ranks.h"
#include "models/gpt.h"
#include "passes/pass_manager.h"

namespace pw {
namespace {

// c[0] += 1: as small as an op gets while still touching its tensor.
Status Increment(KernelContext& ctx) {
  ctx.Out("Out")->f32()[0] += 1.0f;
  return OkStatus();
}

Var Counter(const std::string& name) {
  Var v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.shape = {1};
  v.persistable = true;
  return v;
}

// `micro_batches` jobs of one program of `ops_per_job` increments. Op i runs on
// streams[i % streams.size()]; with `events`, op i waits on the event op i-1 recorded
// (op 0 on the last op of the previous micro-batch).
Module IncrementModule(int ops_per_job, int micro_batches, std::vector<std::string> streams,
                       bool events) {
  Program p("p");
  p.info().kind = "forward";
  p.info().stage = 0;
  for (const std::string& s : streams) p.AddVar(Counter("c_" + s));
  for (int i = 0; i < ops_per_job; ++i) {
    const std::string& stream = streams[i % streams.size()];
    Op op;
    op.type = "bench_increment";
    op.stream = stream;
    op.SetInput("X", {"c_" + stream}).SetOutput("Out", {"c_" + stream});
    if (events) {
      op.wait_events = {i == 0 ? "h" + std::to_string(ops_per_job - 1) + "@-1"
                               : "h" + std::to_string(i - 1)};
      op.record_events = {"h" + std::to_string(i)};
    }
    p.AddOp(std::move(op));
  }
  Module m;
  m.AddProgram(std::move(p));
  m.plan.num_micro_batches = micro_batches;
  m.plan.stage_to_rank = {0};
  RankPlan r;
  for (int mb = 0; mb < micro_batches; ++mb) {
    Job j;
    j.kind = JobKind::kForward;
    j.micro_batch = mb;
    j.program = "p";
    r.jobs.push_back(j);
  }
  m.plan.ranks.push_back(r);
  return m;
}

void RunSteps(benchmark::State& state, const Module& module, int64_t units, const char* counter) {
  cpu::CpuBackendOptions options;
  options.extra_kernels = {{"bench_increment", Increment}};
  cpu::CpuBackend backend(options);
  auto interp = Interpreter::Create(module, 0, backend, InterpreterOptions{});
  if (!interp.ok()) {
    state.SkipWithError(interp.status().ToString().c_str());
    return;
  }
  if (!(*interp)->InitializeParameters().ok()) state.SkipWithError("cannot initialise");
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    auto stats = (*interp)->RunStep(nullptr);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!stats.ok()) {
      state.SkipWithError(stats.status().ToString().c_str());
      return;
    }
    state.SetIterationTime(seconds);
    state.counters[counter] = benchmark::Counter(seconds * 1e6 / static_cast<double>(units));
  }
  state.SetItemsProcessed(state.iterations() * units);
}

void BM_DispatchOneStream(benchmark::State& state) {
  const int ops_per_job = 1000, jobs = 1000;  // 1,000,000 ops per step
  static const Module module = IncrementModule(ops_per_job, jobs, {"compute"}, false);
  RunSteps(state, module, int64_t{ops_per_job} * jobs, "us_per_op");
}
BENCHMARK(BM_DispatchOneStream)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_PingPongTwoStreams(benchmark::State& state) {
  const int ops_per_job = 1000, jobs = 50;  // 50,000 hops per step
  static const Module module = IncrementModule(ops_per_job, jobs, {"compute", "mp_comm"}, true);
  RunSteps(state, module, int64_t{ops_per_job} * jobs, "us_per_hop");
}
BENCHMARK(BM_PingPongTwoStreams)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

struct GptCase {
  const char* model;
  const char* schedule;
  int64_t layers, hidden, heads;
  int vpp;
  bool split_backward;
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
};

void BM_GptStep(benchmark::State& state, GptCase c) {
  models::GptConfig g;
  g.layers = c.layers;
  g.hidden = c.hidden;
  g.heads = c.heads;
  g.ffn = 4 * c.hidden;
  g.seq = 16;
  g.vocab = 128;
  g.micro_batch_size = 2;
  g.mp = 2;
  g.pp = 2;
  g.vpp = c.vpp;
  g.placement = c.placement;
  auto module = models::BuildGpt(g);
  PassManager pm;
  Status added = pm.AddPipeline(
      StrCat("append-backward,split-program", c.split_backward ? "{split-backward=true}" : "",
             ",schedule{kind=", c.schedule, ",micro-batches=8},insert-p2p"));
  if (!module.ok() || !added.ok() || !pm.Run(*module).ok()) {
    state.SkipWithError("cannot plan the model");
    return;
  }
  RankRunOptions options;
  options.steps = 4;
  for (auto _ : state) {
    auto run = RunLocalRanks(*module, options);
    if (!run.ok()) {
      state.SkipWithError(run.status().ToString().c_str());
      return;
    }
    std::vector<double> times = run->StepTimesMs();
    times.erase(times.begin());  // the first step warms up allocators and connections
    std::sort(times.begin(), times.end());
    state.SetIterationTime(times[times.size() / 2] / 1e3);
    std::vector<int64_t> peaks = run->PeakBytes();
    for (size_t r = 0; r < peaks.size(); ++r)
      state.counters[StrCat("peak_MiB_r", r)] = static_cast<double>(peaks[r]) / (1 << 20);
  }
}

void RegisterGptSteps() {
  const GptCase cases[] = {
      {"small", "fthenb", 4, 64, 4, 1, false},
      {"small", "1f1b", 4, 64, 4, 1, false},
      {"small", "eager-1f1b", 4, 64, 4, 1, false},
      {"small", "interleaved-1f1b", 4, 64, 4, 2, false},
      {"small", "zb-h1", 4, 64, 4, 1, true},
      {"small", "zb-v", 4, 64, 4, 2, true, models::ChunkPlacement::kV},
      {"small", "dualpipe-v", 4, 64, 4, 2, true, models::ChunkPlacement::kV},
      {"large", "1f1b", 8, 512, 8, 1, false},
      {"large", "fthenb", 8, 512, 8, 1, false},
  };
  for (const GptCase& c : cases)
    benchmark::RegisterBenchmark(StrCat("BM_GptStep/", c.model, "/", c.schedule).c_str(),
                                 [c](benchmark::State& s) { BM_GptStep(s, c); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
}

}  // namespace
}  // namespace pw

int main(int argc, char** argv) {
  pw::RegisterGptSteps();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
