// How the IR scales with program size: load a binary module + verify + build the
// dependency graph + topological order, for synthetic programs of 10^4 .. 10^6 ops.
// Target: 10^6 ops in under 5 s, linear growth (compare the per-op time across sizes).
//
//   build/benchmarks/ir_scaling_bench --benchmark_repetitions=3 \
//       --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <map>
#include <random>

#include "ir/graph.h"
#include "ir/proto_io.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace pw {
namespace {

// A layered elementwise program: every op reads one or two recent values (so the graph
// has realistic fan-in and long-range edges) and writes a fresh var.
Module SyntheticModule(int64_t num_ops) {
  Module m;
  m.name = "synthetic";
  Program p("main");
  p.ReserveVars(num_ops + 1);
  const Shape shape{4, 8};
  p.AddVar(Var{"v0", DataType::kFloat32, shape, true, true});
  std::mt19937_64 rng(42);
  for (int64_t i = 1; i <= num_ops; ++i) {
    std::string out = "v" + std::to_string(i);
    p.AddVar(Var{out, DataType::kFloat32, shape});
    Op op;
    std::string a = "v" + std::to_string(i - 1);
    if (i % 3 == 0) {
      std::string b =
          "v" + std::to_string(i - 1 - static_cast<int64_t>(rng() % std::min<int64_t>(i, 64)));
      op.type = "add";
      op.SetInput("X", {a}).SetInput("Y", {b});
    } else {
      op.type = "scale";
      op.SetInput("X", {a});
      op.SetAttr("scale", 0.5);
    }
    op.SetOutput("Out", {out});
    p.AddOp(std::move(op));
  }
  m.AddProgram(std::move(p));
  return m;
}

const std::string& SerializedModule(int64_t num_ops) {
  static std::map<int64_t, std::string> cache;
  auto it = cache.find(num_ops);
  if (it == cache.end())
    it = cache.emplace(num_ops, *SerializeModule(SyntheticModule(num_ops), ModuleFormat::kBinary))
             .first;
  return it->second;
}

void BM_LoadVerifyGraphTopo(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& bytes = SerializedModule(n);
  const OpRegistry& registry = ops::Registry();
  for (auto _ : state) {
    auto module = ParseModule(bytes, ModuleFormat::kBinary);
    if (!module.ok()) state.SkipWithError(module.status().message().c_str());
    Status s = VerifyModule(*module, registry);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    DepGraph graph = BuildDependencyGraph(module->main_program());
    std::vector<OpIndex> order = TopologicalOrder(graph);
    benchmark::DoNotOptimize(order.data());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
  state.SetLabel(std::to_string(bytes.size() / 1024) + " KiB");
}
BENCHMARK(BM_LoadVerifyGraphTopo)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);

// The parts on their own at 10^5 ops, to see where the time goes.
void BM_Parse(benchmark::State& state) {
  const std::string& bytes = SerializedModule(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(ParseModule(bytes, ModuleFormat::kBinary).ok());
}
BENCHMARK(BM_Parse)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_Verify(benchmark::State& state) {
  Module m = *ParseModule(SerializedModule(state.range(0)), ModuleFormat::kBinary);
  for (auto _ : state) benchmark::DoNotOptimize(VerifyModule(m, ops::Registry()).ok());
}
BENCHMARK(BM_Verify)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_GraphAndTopo(benchmark::State& state) {
  Module m = *ParseModule(SerializedModule(state.range(0)), ModuleFormat::kBinary);
  for (auto _ : state) {
    DepGraph g = BuildDependencyGraph(m.main_program());
    benchmark::DoNotOptimize(TopologicalOrder(g).size());
  }
}
BENCHMARK(BM_GraphAndTopo)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pw

BENCHMARK_MAIN();
