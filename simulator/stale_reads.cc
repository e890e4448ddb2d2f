#include "simulator/stale_reads.h"

#include <algorithm>

namespace pw::cost {
namespace {

// Sums over touch times (a Fenwick tree): a slot's bytes sit at its latest touch, so the
// bytes between two times are the distinct bytes touched in between.
class TouchSums {
 public:
  explicit TouchSums(size_t n) : tree_(n + 1, 0) {}
  void Add(size_t at, int64_t bytes) {
    for (size_t i = at + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += bytes;
  }
  int64_t Before(size_t end) const {  // times [0, end)
    int64_t sum = 0;
    for (size_t i = end; i > 0; i -= i & (~i + 1)) sum += tree_[i];
    return sum;
  }

 private:
  std::vector<int64_t> tree_;
};

}  // namespace

std::vector<int64_t> StaleReadBytes(const SimGraph& g, int64_t capacity) {
  std::vector<int64_t> stale(g.instrs.size(), 0);
  std::vector<int64_t> last(g.slots.size(), -1);  // latest touch time of each slot
  for (const std::vector<int>& order : g.rank_order) {
    std::vector<int> compute;
    size_t touches = 0;
    for (int i : order)
      if (g.instrs[i].kind == InstrKind::kCompute) {
        compute.push_back(i);
        touches += g.instrs[i].uses.size();
      }
    TouchSums sums(2 * touches);
    size_t now = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i : compute) {
        const SimInstr& instr = g.instrs[i];
        for (int slot : instr.uses) {
          const int64_t bytes = g.slots[slot].bytes;
          if (last[slot] >= 0) {
            const bool read =
                std::find(instr.allocs.begin(), instr.allocs.end(), slot) == instr.allocs.end();
            const int64_t since = sums.Before(now) - sums.Before(last[slot] + 1);
            if (pass == 1 && read && since > capacity) stale[i] += bytes;
            sums.Add(static_cast<size_t>(last[slot]), -bytes);
          }
          sums.Add(now, bytes);
          last[slot] = static_cast<int64_t>(now++);
        }
      }
    }
    for (int i : compute)
      for (int slot : g.instrs[i].uses) last[slot] = -1;
  }
  return stale;
}

}  // namespace pw::cost
