// Time of the stream passes on planned GPT-3 shapes: assign-streams,
// overlap-column-parallel-backward, overlap-1f1b (H100 cost model) and insert-events, each
// on a fresh copy of the planned module (1f1b; neither the copy nor its destruction is
// timed). The counters give insert-events' statistics: the waits it wrote, the waits a
// step executes against the naive one per cross-stream dependency, and the events.
//
//   build/benchmarks/stream_passes_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//
// Shapes: 6.7B (32 layers, hidden 4096, mp 2 x pp 4, 16 micro-batches) and 175B (96
// layers, hidden 12288, mp 8 x pp 16, 64 micro-batches). The 175B figure is the issue's
// bounds: insert-events under 1 s, overlap-1f1b under 2 s.

#include <benchmark/benchmark.h>

#include <map>
#include <optional>

#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

struct Shape {
  int layers, hidden, heads, mp, pp, micro_batches;
};

const Shape kShapes[] = {{32, 4096, 32, 2, 4, 16}, {96, 12288, 96, 8, 16, 64}};

Status RunPasses(Module& module, const std::string& pipeline, PassContext* context = nullptr) {
  PassManager pm;
  pm.EnableVerifier(false);
  PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  if (context) return pm.Run(module, *context).status();
  PassContext local(ops::Registry());
  return pm.Run(module, local).status();
}

// The planned module of a shape, and the same after the passes before `pass`.
const Module& Planned(int shape, const std::string& before) {
  static std::map<std::pair<int, std::string>, Module> cache;
  auto key = std::make_pair(shape, before);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const Shape& s = kShapes[shape];
  models::GptConfig g;
  g.layers = s.layers;
  g.hidden = s.hidden;
  g.heads = s.heads;
  g.ffn = 4 * s.hidden;
  g.seq = 2048;
  g.vocab = 51200;
  g.micro_batch_size = 1;
  g.mp = s.mp;
  g.pp = s.pp;
  Module m = *models::BuildGpt(g);
  std::string pipeline = StrCat(
      "append-backward{optimizer=adam},split-program,schedule{kind=1f1b,"
      "micro-batches=",
      s.micro_batches, "},insert-p2p");
  if (!before.empty()) pipeline += "," + before;
  Status ran = RunPasses(m, pipeline);
  if (!ran.ok()) std::abort();
  return cache.emplace(key, std::move(m)).first->second;
}

void BM_Pass(benchmark::State& state, const std::string& pass, const std::string& before) {
  const Module& planned = Planned(static_cast<int>(state.range(0)), before);
  // The copy and the context live across iterations so that their destructors (most of
  // what a copy of a 175B plan costs) run while the timer is paused, not after it resumes.
  std::optional<Module> m;
  std::optional<PassContext> fresh;
  for (auto _ : state) {
    state.PauseTiming();
    m.reset();
    fresh.reset();
    m.emplace(planned);
    fresh.emplace(ops::Registry());
    // overlap-1f1b prices its cuts on the H100 spec, as `opt --device h100` gives it.
    auto estimator = cost::Estimator::Create(*cost::BuiltinDeviceSpec("h100"), {});
    fresh->Attach(std::make_shared<cost::Simulator>(*estimator, ops::Registry()));
    fresh->Attach(*estimator);
    state.ResumeTiming();
    Status ran = RunPasses(*m, pass, &*fresh);
    state.PauseTiming();
    if (!ran.ok()) {
      state.SkipWithError(ran.message().c_str());
      break;
    }
    if (fresh->statistics().size() == 1)
      for (const auto& [name, value] : fresh->statistics().front().counters)
        state.counters[name] = static_cast<double>(value);
    state.ResumeTiming();
  }
  state.SetLabel(static_cast<int>(state.range(0)) == 0 ? "GPT-3 6.7B mp2 pp4 M=16"
                                                       : "GPT-3 175B mp8 pp16 M=64");
}

BENCHMARK_CAPTURE(BM_Pass, assign_streams, std::string("assign-streams"), std::string())
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pass, overlap_column_parallel_backward,
                  std::string("overlap-column-parallel-backward"), std::string("assign-streams"))
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pass, overlap_1f1b, std::string("overlap-1f1b"),
                  std::string("assign-streams,overlap-column-parallel-backward"))
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pass, insert_events, std::string("insert-events"),
                  std::string("assign-streams,overlap-column-parallel-backward"))
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pw

BENCHMARK_MAIN();
