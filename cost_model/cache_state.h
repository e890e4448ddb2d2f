#pragma once
// The cache state an op meets in a real step, which the profiler recreates before every
// timed run. Repeating one op keeps all its data in the nearest caches, which a step never
// does: between two uses of a weight the rest of the model passes through the caches. So
// before each run the profiler evicts the caches and touches the op's activations again
// (a step has just produced them), and its weights and optimizer state come from L3. Only
// when a stage's persistent data is many times L3 do they come from memory: up to that,
// the layers just used stay in L3 and the prefetchers stream the rest (on this machine the
// large GPT's reference step, 400 MB of state, measured 1.0-1.1 s; profiled from L3 it
// predicts 1.09 s, from memory 2.1 s).

#include <cstdint>
#include <string>
#include <vector>

#include "ir/status.h"

namespace pw::cost {

enum class CacheState {
  kHot,   // no eviction (every input where the previous run left it)
  kL3,    // weights from L3: L1 and L2 evicted
  kDram,  // weights from memory: every level evicted
};
StatusOr<CacheState> ParseCacheState(const std::string& name);  // hot, l3, dram
const char* CacheStateName(CacheState state);

struct CacheSizes {
  int64_t l2 = 1 << 20;   // per core
  int64_t l3 = 32 << 20;  // shared
};
// From /sys/devices/system/cpu/cpu0/cache; the defaults when it cannot be read.
CacheSizes ReadCacheSizes();

// The state for a rank holding `persistent_bytes` of parameters, gradients and optimizer
// state: L3 up to kDramFactor times its size, else memory.
inline constexpr int64_t kDramFactor = 32;
CacheState CacheStateFor(int64_t persistent_bytes, const CacheSizes& sizes);

// Reads a buffer larger than the level to evict, so the next run misses it.
class CacheEvictor {
 public:
  CacheEvictor(CacheState state, const CacheSizes& sizes);
  void Evict();
  // Reads every cache line of `data` back in (an activation the step just wrote).
  static void Touch(const void* data, int64_t bytes);

 private:
  std::vector<char> buffer_;
};

}  // namespace pw::cost
