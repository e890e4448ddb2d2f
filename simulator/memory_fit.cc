#include "simulator/memory_fit.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace pw::cost {
namespace {

// "0-3, 5, 7-8"
std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string FormatBytes(double bytes) {
  char buf[64];
  const double mib = bytes / (1024.0 * 1024.0);
  if (mib >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f PiB", mib / (1024.0 * 1024 * 1024));
  else if (mib >= 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f TiB", mib / (1024.0 * 1024.0));
  else if (mib >= 1024)
    std::snprintf(buf, sizeof(buf), "%.1f GiB", mib / 1024);
  else
    std::snprintf(buf, sizeof(buf), "%.1f MiB", mib);
  return buf;
}

MemoryFit FitMemory(const SimResult& result, const DeviceSpec& device, int64_t limit_bytes) {
  MemoryFit fit;
  fit.device = device.name();
  const double capacity =
      limit_bytes > 0 ? static_cast<double>(limit_bytes) : device.memory_capacity();
  fit.capacity = static_cast<int64_t>(capacity);
  fit.limited = limit_bytes > 0;
  fit.checked = capacity > 0;
  fit.shared_node = device.cores_per_node() > 0;
  const auto reserved = static_cast<int64_t>(device.memory_reserved());
  const int per_node = device.ranks_per_node() > 0 ? device.ranks_per_node() : 1 << 30;
  std::map<int, int64_t> node_need;
  if (fit.shared_node)
    for (const RankResult& r : result.ranks)
      node_need[r.rank / per_node] += r.peak_bytes + reserved;
  for (const RankResult& r : result.ranks) {
    RankFit rf;
    rf.rank = r.rank;
    rf.need = fit.shared_node ? node_need[r.rank / per_node] : r.peak_bytes + reserved;
    rf.usable = fit.capacity;
    rf.fits = !fit.checked || rf.need <= rf.usable;
    fit.fits = fit.fits && rf.fits;
    fit.ranks.push_back(rf);
  }
  return fit;
}

const RankFit* MemoryFit::Tightest() const {
  const RankFit* tightest = nullptr;
  for (const RankFit& r : ranks)
    if (!tightest || r.need - r.usable > tightest->need - tightest->usable) tightest = &r;
  return tightest;
}

std::string MemoryFit::Summary() const {
  if (!checked) return "memory: not checked (device '" + device + "' has no memory_capacity)";
  const RankFit* tightest = Tightest();
  if (!tightest) return "memory: no ranks";
  std::string of = FormatBytes(static_cast<double>(tightest->need)) + " of " +
                   FormatBytes(static_cast<double>(capacity)) + " " +
                   (shared_node ? "shared by the node's ranks"
                    : limited   ? "per rank"
                                : "per " + device);
  if (limited) of += ", a limit given in place of " + device + "'s memory";
  if (fits)
    return "memory: every rank fits (the most: rank " + std::to_string(tightest->rank) + ", " + of +
           ")";
  std::vector<int> over;
  for (const RankFit& r : ranks)
    if (!r.fits) over.push_back(r.rank);
  return "memory: DOES NOT FIT: rank" + std::string(over.size() > 1 ? "s " : " ") + RankList(over) +
         " need up to " + of + " (" +
         FormatBytes(static_cast<double>(tightest->need - tightest->usable)) +
         " over); recompute activations, use more pipeline or tensor parallelism, or fewer "
         "micro-batches in flight";
}

Status CheckRepresentableMemory(const std::vector<double>& persistent_bytes_by_rank,
                                const DeviceSpec& device) {
  constexpr double kFactor = 1000;
  if (device.memory_capacity() <= 0) return OkStatus();
  for (size_t r = 0; r < persistent_bytes_by_rank.size(); ++r) {
    const double held = persistent_bytes_by_rank[r];
    if (held > kFactor * device.memory_capacity())
      return InvalidArgument("rank ", r, " holds ", FormatBytes(held),
                             " of parameters and optimizer state alone, more than ", kFactor,
                             " times the ", FormatBytes(device.memory_capacity()), " of a ",
                             device.name(), ": check the model's sizes");
  }
  return OkStatus();
}

}  // namespace pw::cost
