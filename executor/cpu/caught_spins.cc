#include "executor/cpu/caught_spins.h"

#include <atomic>

namespace pw::cpu {
namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_waits{0}, g_cpu_nanos{0};
std::atomic<int64_t> g_shared_waits{0}, g_shared_cpu_nanos{0}, g_shared_nanos{0};

}  // namespace

void CountCaughtSpins(bool on) { g_counting.store(on, std::memory_order_relaxed); }

bool CountingCaughtSpins() { return g_counting.load(std::memory_order_relaxed); }

void AddCaughtSpin(int64_t cpu_nanos, int64_t wall_nanos) {
  g_waits.fetch_add(1, std::memory_order_relaxed);
  g_cpu_nanos.fetch_add(cpu_nanos, std::memory_order_relaxed);
  if (2 * cpu_nanos > wall_nanos) return;  // it kept its core
  g_shared_waits.fetch_add(1, std::memory_order_relaxed);
  g_shared_cpu_nanos.fetch_add(cpu_nanos, std::memory_order_relaxed);
  g_shared_nanos.fetch_add(wall_nanos, std::memory_order_relaxed);
}

CaughtSpins CaughtSpinsSoFar() {
  auto seconds = [](const std::atomic<int64_t>& nanos) {
    return static_cast<double>(nanos.load(std::memory_order_relaxed)) * 1e-9;
  };
  return {g_waits.load(std::memory_order_relaxed), seconds(g_cpu_nanos),
          g_shared_waits.load(std::memory_order_relaxed), seconds(g_shared_cpu_nanos),
          seconds(g_shared_nanos)};
}

}  // namespace pw::cpu
