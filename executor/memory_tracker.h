#pragma once
// Bytes of tensor storage a rank holds, and the most it ever held. Streams allocate and
// free concurrently, so the counters are atomic; the peak is exact (a CAS loop), not a
// sampled estimate.

#include <atomic>
#include <cstdint>

namespace pw {

class MemoryTracker {
 public:
  void Allocate(int64_t bytes) {
    int64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void Free(int64_t bytes) { current_.fetch_sub(bytes, std::memory_order_relaxed); }

  int64_t current() const { return current_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  // Starts a new measurement window at the current level (e.g. at the start of a step).
  void ResetPeak() { peak_.store(current(), std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace pw
