#pragma once
// Whether a simulated plan fits the memory of the device it is priced for. A GPU rank owns
// its device: it fits when its peak plus what the runtime holds beside tensors
// (DeviceSpec.memory_reserved) is at most the device's memory. The ranks of a CPU node
// (cores_per_node > 0) share its memory: they fit when their peaks together do (a bound:
// their peaks need not coincide).

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/device_spec.h"
#include "simulator/simulator.h"

namespace pw::cost {

struct RankFit {
  int rank = 0;
  int64_t need = 0;    // its peak and the reservation (on a shared node: the node's sum)
  int64_t usable = 0;  // the capacity it is held against
  bool fits = true;
};

struct MemoryFit {
  bool checked = false;  // false: the device's memory is unknown (capacity 0)
  bool fits = true;
  bool shared_node = false;
  bool limited = false;  // the capacity is a limit given in place of the device's memory
  std::string device;
  int64_t capacity = 0;
  std::vector<RankFit> ranks;

  // One line: "fits: ..." or "does not fit: ranks 0-3, 5 need up to 91.5 GiB of 79.6 GiB".
  std::string Summary() const;
  // The rank that needs the most beyond its capacity (or the closest to it).
  const RankFit* Tightest() const;
};

// `limit_bytes` > 0 replaces the device's capacity (tune --mem-limit).
MemoryFit FitMemory(const SimResult& result, const DeviceSpec& device, int64_t limit_bytes = 0);

// Refuses, before anything is simulated, a plan no device could hold: a rank whose
// persistent bytes alone exceed 1000 times the device's memory (a size typed wrong),
// naming the rank and the figure.
Status CheckRepresentableMemory(const std::vector<double>& persistent_bytes_by_rank,
                                const DeviceSpec& device);

// "91.5 GiB", "512.0 MiB".
std::string FormatBytes(double bytes);

}  // namespace pw::cost
