// The SIMD loops of the CPU kernels (ops/kernels/cpu/vector_math.h) against the scalar
// loops they replaced, on 1M floats (the size of the medium GPT's FFN activations per
// micro-batch: 4 x 128 x 2048). CPU time per call; the ratio of a pair is the speed-up.
//
//   build/benchmarks/cpu_kernels_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

constexpr int64_t kN = 4 * 128 * 2048;

std::vector<float> Random(float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(kN);
  for (float& x : v) x = dist(gen);
  return v;
}

void BM_GeluScalarLibm(benchmark::State& state) {
  std::vector<float> x = Random(-4, 4, 1), y(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i)
      y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(VectorTargetName());
}
BENCHMARK(BM_GeluScalarLibm);

void BM_GeluVector(benchmark::State& state) {
  std::vector<float> x = Random(-4, 4, 1), y(kN);
  for (auto _ : state) {
    GeluF32(x.data(), y.data(), kN);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(VectorTargetName());
}
BENCHMARK(BM_GeluVector);

void BM_GeluGradScalarLibm(benchmark::State& state) {
  std::vector<float> x = Random(-4, 4, 1), g = Random(-1, 1, 2), dx(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i) {
      float cdf = 0.5f * (1.0f + std::erf(x[i] * 0.70710678118654752f));
      float pdf = 0.39894228040143268f * std::exp(-0.5f * x[i] * x[i]);
      dx[i] = g[i] * (cdf + x[i] * pdf);
    }
    benchmark::DoNotOptimize(dx.data());
  }
}
BENCHMARK(BM_GeluGradScalarLibm);

void BM_GeluGradVector(benchmark::State& state) {
  std::vector<float> x = Random(-4, 4, 1), g = Random(-1, 1, 2), dx(kN);
  for (auto _ : state) {
    GeluGradF32(x.data(), g.data(), dx.data(), kN);
    benchmark::DoNotOptimize(dx.data());
  }
}
BENCHMARK(BM_GeluGradVector);

void BM_ExpScalarLibm(benchmark::State& state) {
  std::vector<float> x = Random(-20, 0, 3), y(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i) y[i] = std::exp(x[i] - 0.5f);
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_ExpScalarLibm);

void BM_ExpVector(benchmark::State& state) {
  std::vector<float> x = Random(-20, 0, 3), y(kN);
  for (auto _ : state) {
    ExpShiftedF32(x.data(), 0.5f, y.data(), kN);
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_ExpVector);

void BM_AdamScalar(benchmark::State& state) {
  std::vector<float> p = Random(-1, 1, 4), g = Random(-1, 1, 5), m1 = Random(-1, 1, 6),
                     m2 = Random(0, 1, 7);
  const AdamStepF32 s{0.9f, 0.999f, 1e-3f, 1e-8f};
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i) {
      float m1i = s.beta1 * m1[i] + (1 - s.beta1) * g[i];
      float m2i = s.beta2 * m2[i] + (1 - s.beta2) * g[i] * g[i];
      m1[i] = m1i;
      m2[i] = m2i;
      p[i] = p[i] - s.lr_t * m1i / (std::sqrt(m2i) + s.eps_t);
    }
    benchmark::DoNotOptimize(p.data());
  }
}
BENCHMARK(BM_AdamScalar);

void BM_AdamVector(benchmark::State& state) {
  std::vector<float> p = Random(-1, 1, 4), g = Random(-1, 1, 5), m1 = Random(-1, 1, 6),
                     m2 = Random(0, 1, 7);
  const AdamStepF32 s{0.9f, 0.999f, 1e-3f, 1e-8f};
  for (auto _ : state) {
    AdamF32(s, p.data(), g.data(), m1.data(), m2.data(), p.data(), m1.data(), m2.data(), kN);
    benchmark::DoNotOptimize(p.data());
  }
}
BENCHMARK(BM_AdamVector);

}  // namespace
}  // namespace pw::ops::cpu

BENCHMARK_MAIN();
