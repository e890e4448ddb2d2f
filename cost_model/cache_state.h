#pragma once
// The cache state an op meets in a real step, which the profiler recreates before every
// timed run. Repeating one op keeps all its data in the nearest caches, which a step never
// does: between two uses of a weight the rest of the model passes through the caches. So
// before each run the profiler evicts the caches and touches the op's activations again
// (a step has just produced them). Its weights come from L3 when the parameters of the
// rank fit in it (they are still there from the previous micro-batch), else from memory.
// On this machine (32 MiB L3) the large GPT's reference step (100 MiB of parameters)
// measured 1.10-1.18 s, priced 1.03 s from memory and 0.89 s from L3; its 4-rank runs
// (25 MiB per rank) computed per rank about what L3 prices.

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

// The state for a rank holding `parameter_bytes` of parameters: L3 when they fit in it,
// else memory.
CacheState CacheStateFor(int64_t parameter_bytes, const CacheSizes& sizes);

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
