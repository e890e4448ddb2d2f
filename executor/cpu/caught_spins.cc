#include "executor/cpu/caught_spins.h"

#include <atomic>

namespace pw::cpu {
namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_waits{0}, g_cpu_nanos{0}, g_wall_nanos{0};

}  // namespace

void CountCaughtSpins(bool on) { g_counting.store(on, std::memory_order_relaxed); }

bool CountingCaughtSpins() { return g_counting.load(std::memory_order_relaxed); }

void AddCaughtSpin(int64_t cpu_nanos, int64_t wall_nanos) {
  g_waits.fetch_add(1, std::memory_order_relaxed);
  g_cpu_nanos.fetch_add(cpu_nanos, std::memory_order_relaxed);
  g_wall_nanos.fetch_add(wall_nanos, std::memory_order_relaxed);
}

CaughtSpins CaughtSpinsSoFar() {
  return {g_waits.load(std::memory_order_relaxed),
          static_cast<double>(g_cpu_nanos.load(std::memory_order_relaxed)) * 1e-9,
          static_cast<double>(g_wall_nanos.load(std::memory_order_relaxed)) * 1e-9};
}

}  // namespace pw::cpu
