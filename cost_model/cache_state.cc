#include "cost_model/cache_state.h"

#include <cstring>
#include <fstream>

namespace pw::cost {
namespace {

// "1024K", "32M" -> bytes; 0 when unreadable.
int64_t ReadSize(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty()) return 0;
  int64_t unit = 1;
  char last = text.back();
  if (last == 'K') unit = 1 << 10;
  if (last == 'M') unit = 1 << 20;
  if (unit > 1) text.pop_back();
  try {
    return std::stoll(text) * unit;
  } catch (...) {
    return 0;
  }
}

}  // namespace

StatusOr<CacheState> ParseCacheState(const std::string& name) {
  if (name == "hot") return CacheState::kHot;
  if (name == "l3") return CacheState::kL3;
  if (name == "dram") return CacheState::kDram;
  return InvalidArgument("unknown cache state '", name, "' (hot, l3, dram)");
}

const char* CacheStateName(CacheState state) {
  switch (state) {
    case CacheState::kHot:
      return "hot";
    case CacheState::kL3:
      return "l3";
    case CacheState::kDram:
      return "dram";
  }
  return "?";
}

CacheSizes ReadCacheSizes() {
  CacheSizes sizes;
  for (int i = 0; i < 5; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level");
    int level = 0;
    if (!(level_file >> level)) continue;
    int64_t size = ReadSize(dir + "size");
    if (size <= 0) continue;
    if (level == 2) sizes.l2 = size;
    if (level == 3) sizes.l3 = size;
  }
  return sizes;
}

CacheState CacheStateFor(int64_t parameter_bytes, const CacheSizes& sizes) {
  return parameter_bytes <= sizes.l3 ? CacheState::kL3 : CacheState::kDram;
}

CacheEvictor::CacheEvictor(CacheState state, const CacheSizes& sizes) {
  if (state == CacheState::kL3) buffer_.resize(static_cast<size_t>(sizes.l2) * 2);
  if (state == CacheState::kDram) buffer_.resize(static_cast<size_t>(sizes.l3) * 2);
  std::memset(buffer_.data(), 1, buffer_.size());  // real pages, not the shared zero page
}

void CacheEvictor::Evict() {
  // Reading leaves clean lines behind: the timed op pays no write-backs for them.
  Touch(buffer_.data(), static_cast<int64_t>(buffer_.size()));
}

void CacheEvictor::Touch(const void* data, int64_t bytes) {
  const volatile char* p = static_cast<const char*>(data);
  char sink = 0;
  for (int64_t i = 0; i < bytes; i += 64) sink ^= p[i];
  (void)sink;
}

}  // namespace pw::cost
