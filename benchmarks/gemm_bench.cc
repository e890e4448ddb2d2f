// The CPU GEMM on the GPT's shapes: ops' Gemm (oneDNN's single-thread sgemm, cut across the
// kernel threads by C's columns) beside OpenBLAS's sgemm with its own threads, at 1 and 2
// threads (second argument). Shapes are the
// medium GPT's (512 tokens per micro-batch, hidden 512, ffn 2048) forward (NN), input
// gradient (NT) and weight gradient (TN) products, and one attention head (seq 128).
// Counter GFLOPS is 2·m·n·k per second of wall time.
//
//   build/benchmarks/gemm_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/kernel.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/math_module.h"
#ifdef PW_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace pw::ops::cpu {
namespace {

struct Shape {
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// Benchmark argument i picks kShapes[i].
const Shape kShapes[] = {
    {false, false, 512, 1536, 512},  // qkv forward
    {false, false, 512, 2048, 512},  // fc1 forward
    {false, false, 512, 512, 2048},  // fc2 forward
    {false, true, 512, 512, 2048},   // fc1 input gradient
    {false, true, 512, 2048, 512},   // fc2 input gradient
    {true, false, 512, 2048, 512},   // fc1 weight gradient
    {true, false, 2048, 512, 512},   // fc2 weight gradient
    {false, true, 128, 128, 64},     // attention scores, one head
    // cost_model_accuracy.sh's large GPT: 32 tokens per micro-batch.
    {false, false, 32, 2048, 512},  // fc1 forward
    {false, true, 32, 512, 2048},   // fc1 input gradient
    {true, false, 512, 2048, 32},   // fc1 weight gradient
};

struct Operands {
  explicit Operands(const Shape& s) : s(s), a(s.m * s.k), b(s.k * s.n), c(s.m * s.n) {
    std::mt19937 gen(1);
    std::normal_distribution<float> dist;
    for (float& x : a) x = dist(gen);
    for (float& x : b) x = dist(gen);
  }
  int64_t lda() const { return s.trans_a ? s.m : s.k; }
  int64_t ldb() const { return s.trans_b ? s.k : s.n; }
  Shape s;
  std::vector<float> a, b, c;
};

void Label(benchmark::State& state, const Shape& s, const std::string& gemm = "") {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(s.trans_a ? "T" : "N") + (s.trans_b ? "T " : "N ") +
                 std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                 (gemm.empty() ? "" : " " + gemm));
}

#ifdef PW_HAVE_OPENBLAS
void BM_OpenBlas(benchmark::State& state) {
  Operands o(kShapes[state.range(0)]);
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, o.s.trans_a ? CblasTrans : CblasNoTrans,
                o.s.trans_b ? CblasTrans : CblasNoTrans, o.s.m, o.s.n, o.s.k, 1, o.a.data(),
                o.lda(), o.b.data(), o.ldb(), 0, o.c.data(), o.s.n);
    benchmark::DoNotOptimize(o.c.data());
  }
  Label(state, o.s);
}
BENCHMARK(BM_OpenBlas)
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(kShapes) - 1, 1), {1, 2}})
    ->UseRealTime();
#endif

void BM_OpsGemm(benchmark::State& state) {
  Operands o(kShapes[state.range(0)]);
  SetKernelThreads(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    Gemm(o.s.trans_a, o.s.trans_b, o.s.m, o.s.n, o.s.k, 1, o.a.data(), o.lda(), o.b.data(), o.ldb(),
         0, o.c.data(), o.s.n);
    benchmark::DoNotOptimize(o.c.data());
  }
  SetKernelThreads(1);
  Label(state, o.s, CpuMath().gemm_name());  // which GEMM ran: onednn or ordered
}
BENCHMARK(BM_OpsGemm)
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(kShapes) - 1, 1), {1, 2}})
    ->UseRealTime();

}  // namespace
}  // namespace pw::ops::cpu

BENCHMARK_MAIN();
