// How the op-level simulator scales with the number of instructions: lowering a plan
// (BuildSimGraph) and replaying it (Simulate) for GPT plans of about 10^4 .. 10^7
// instructions per step, with mp/dp peers folded (what `pipeweave sim` does) and whole
// (every rank lowered and replayed, up to 10^6). items_per_second is instructions of the
// whole step per second; linear cost shows as a flat rate across sizes.
//
//   build/benchmarks/sim_scaling_bench --benchmark_repetitions=3 \
//       --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

// The GPT-3 175B shape (mp 8, pp 16) past 10^6 instructions, a 1.3B-class one (mp 2,
// pp 4) below.
models::GptConfig Shape(int64_t target) {
  models::GptConfig g;
  const bool large = target >= 1000000;
  g.layers = large ? 96 : 24;
  g.hidden = large ? 12288 : 2048;
  g.heads = large ? 96 : 16;
  g.ffn = 4 * g.hidden;
  g.seq = 2048;
  g.vocab = 51200;
  g.micro_batch_size = 1;
  g.mp = large ? 8 : 2;
  g.pp = large ? 16 : 4;
  return g;
}

Module Planned(const models::GptConfig& g, int micro_batches) {
  Module m = models::BuildGpt(g).value();
  PassManager pm;
  Status s = pm.AddPipeline("append-backward,split-program,schedule{kind=1f1b,micro-batches=" +
                            std::to_string(micro_batches) + "},insert-p2p");
  if (s.ok()) s = pm.Run(m).status();
  if (!s.ok()) {
    std::fprintf(stderr, "planning failed: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  return m;
}

int64_t StepInstructions(const cost::SimGraph& g) {
  int64_t n = 0;
  for (int r = 0; r < g.world_size; ++r) n += g.rank_order[g.simulated_rank(r)].size();
  return n;
}

// A plan of about `target` instructions: micro-batches from the growth between pp and 2 pp.
struct Sized {
  Module module;
  int micro_batches = 0;
};
const Sized& PlanOf(int64_t target, const cost::Estimator& estimator) {
  static std::map<int64_t, Sized> plans;
  auto it = plans.find(target);
  if (it != plans.end()) return it->second;
  const models::GptConfig g = Shape(target);
  cost::SimGraphOptions fold;
  fold.fold_replicas = true;
  auto count = [&](int m) {
    return StepInstructions(*cost::BuildSimGraph(Planned(g, m), estimator, ops::Registry(), fold));
  };
  const int64_t at_pp = count(g.pp), per_mb = (count(2 * g.pp) - at_pp) / g.pp;
  const int m = std::max<int64_t>(g.pp, g.pp + (target - at_pp + per_mb / 2) / per_mb);
  return plans.emplace(target, Sized{Planned(g, m), m}).first->second;
}

void BM_Sim(benchmark::State& state) {
  const int64_t target = state.range(0);
  const bool fold = state.range(1) != 0;
  auto estimator = MakeEstimator("h100", "").value();
  const Sized& plan = PlanOf(target, *estimator);
  cost::SimGraphOptions options;
  options.fold_replicas = fold;
  cost::SimOptions sim;
  sim.record_timeline = false;
  int64_t instructions = 0, simulated = 0;
  for (auto _ : state) {
    auto graph = cost::BuildSimGraph(plan.module, *estimator, ops::Registry(), options);
    if (!graph.ok()) {
      state.SkipWithError(graph.status().ToString().c_str());
      break;  // SkipWithError does not leave the loop: *graph would be read below
    }
    auto result = cost::Simulate(*graph, estimator->device(), sim, &estimator->comm());
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(result->step_time);
    instructions = StepInstructions(*graph);
    simulated = static_cast<int64_t>(graph->instrs.size());
  }
  state.SetItemsProcessed(state.iterations() * instructions);
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["simulated"] = static_cast<double>(simulated);
  state.counters["micro_batches"] = plan.micro_batches;
}

BENCHMARK(BM_Sim)
    ->ArgNames({"instructions", "fold"})
    ->Args({10000, 1})
    ->Args({100000, 1})
    ->Args({1000000, 1})
    ->Args({10000000, 1})
    ->Args({10000, 0})
    ->Args({100000, 0})
    ->Args({1000000, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace pw

BENCHMARK_MAIN();
