#include "simulator/stale_bytes.h"

#include <algorithm>
#include <unordered_map>

namespace pw::cost {
namespace {

// Sums over touch times (a Fenwick tree): a block's bytes sit at its latest touch, so the
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

// One rank's memory as its compute touches it: blocks (a persistent slot's, or a freed
// slot's that the next slot of its size takes, as an allocator's free lists hand back the
// block freed last) with the time of their latest touch.
class RankMemory {
 public:
  RankMemory(const SimGraph& g, size_t touches) : g_(g), sums_(touches) {}

  // Touches `slot` now: returns the distinct bytes touched since its block's last touch (-1:
  // a block never touched). `alloc`: the slot takes a block first.
  int64_t Touch(int slot, bool alloc) {
    const int64_t bytes = g_.slots[slot].bytes;
    auto [it, inserted] = block_of_.try_emplace(slot, -1);
    if (alloc || it->second < 0) it->second = Take(bytes);
    int64_t since = -1;
    int64_t& last = last_[it->second];
    if (last >= 0) {
      since = sums_.Before(now_) - sums_.Before(static_cast<size_t>(last) + 1);
      sums_.Add(static_cast<size_t>(last), -bytes);
    }
    sums_.Add(now_, bytes);
    last = static_cast<int64_t>(now_++);
    return since;
  }
  // After a use of `slot` by any instruction: its block is free after its last.
  void Used(int slot) {
    const SimSlot& s = g_.slots[slot];
    if (s.persistent || s.bytes == 0) return;
    auto [it, first] = left_.try_emplace(slot, s.uses);
    if (--it->second > 0) return;
    left_.erase(it);
    auto block = block_of_.find(slot);
    if (block == block_of_.end() || block->second < 0) return;
    free_[s.bytes].push_back(block->second);
    block->second = -1;
  }

 private:
  int Take(int64_t bytes) {
    std::vector<int>& list = free_[bytes];
    if (!list.empty()) {
      const int block = list.back();
      list.pop_back();
      return block;
    }
    last_.push_back(-1);
    return static_cast<int>(last_.size()) - 1;
  }

  const SimGraph& g_;
  TouchSums sums_;
  size_t now_ = 0;
  std::vector<int64_t> last_;                           // per block: latest touch time
  std::unordered_map<int, int> block_of_;               // slot -> block (-1: freed)
  std::unordered_map<int, int> left_;                   // slot -> uses left
  std::unordered_map<int64_t, std::vector<int>> free_;  // bytes -> freed blocks, last on top
};

}  // namespace

std::vector<StaleBytes> CountStaleBytes(const SimGraph& g, const std::vector<int64_t>& capacities) {
  std::vector<StaleBytes> out(capacities.size());
  for (StaleBytes& at : out) {
    at.reads.assign(g.instrs.size(), 0);
    at.writes.assign(g.instrs.size(), 0);
  }
  for (const std::vector<int>& order : g.rank_order) {
    // Compute touches what it uses; a transfer writes what it receives (the compute that
    // reads it next finds it close).
    auto touched = [&](const SimInstr& instr) -> const std::vector<int>& {
      return instr.kind == InstrKind::kCompute ? instr.uses : instr.allocs;
    };
    size_t touches = 0;
    for (int i : order) touches += touched(g.instrs[i]).size();
    RankMemory memory(g, 2 * touches);
    for (int pass = 0; pass < 2; ++pass) {
      for (int i : order) {
        const SimInstr& instr = g.instrs[i];
        for (int slot : touched(instr)) {
          const int64_t bytes = g.slots[slot].bytes;
          if (bytes == 0) continue;  // a view
          const bool alloc =
              std::find(instr.allocs.begin(), instr.allocs.end(), slot) != instr.allocs.end();
          const int64_t since = memory.Touch(slot, alloc);
          if (pass == 0 || instr.kind != InstrKind::kCompute) continue;
          for (size_t c = 0; c < capacities.size(); ++c)
            if (since < 0 || since > capacities[c])
              (alloc ? out[c].writes : out[c].reads)[i] += bytes;
        }
        for (int slot : instr.uses) memory.Used(slot);
      }
    }
  }
  return out;
}

StaleBytes CountStaleBytes(const SimGraph& g, int64_t capacity) {
  return std::move(CountStaleBytes(g, std::vector<int64_t>{capacity}).front());
}

std::vector<std::map<std::string, StaleCounts::Count>> StaleBytesBySignature(
    const SimGraph& g, const std::vector<int64_t>& capacities) {
  std::vector<std::map<std::string, StaleCounts::Count>> out;
  for (const StaleBytes& stale : CountStaleBytes(g, capacities)) {
    std::vector<StaleCounts::Count> sums(g.signatures.size());
    for (size_t i = 0; i < g.instrs.size(); ++i) {
      const SimInstr& instr = g.instrs[i];
      if (instr.kind != InstrKind::kCompute || instr.signature < 0) continue;
      sums[instr.signature].bytes += static_cast<double>(stale.reads[i] + stale.writes[i]);
      sums[instr.signature].runs += 1;
    }
    auto& at = out.emplace_back();
    for (size_t k = 0; k < sums.size(); ++k)
      if (sums[k].runs > 0)
        at[g.signatures[k]] = {sums[k].bytes / sums[k].runs, sums[k].runs / g.steps};
  }
  return out;
}

bool HasStalePrice(const OpCostTable& table) {
  return table.proto().has_stale_price() && table.proto().stale_capacity() > 0;
}

std::vector<double> StaleSeconds(const OpCostTable& table, const SimGraph& g,
                                 const StaleBytes& stale) {
  if (!HasStalePrice(table)) return {};
  // The measured mean of each signature the graph has, looked up once.
  std::vector<const OpCostEntry*> entries(g.signatures.size(), nullptr);
  for (size_t k = 0; k < g.signatures.size(); ++k) {
    const OpCostEntry* e = table.Find(g.signatures[k]);
    if (e && e->has_stale_bytes()) entries[k] = e;
  }
  std::vector<double> added(g.instrs.size(), 0);
  for (size_t i = 0; i < g.instrs.size(); ++i) {
    const SimInstr& instr = g.instrs[i];
    if (instr.kind != InstrKind::kCompute || instr.signature < 0 ||
        instr.path != EstimatePath::kTable || !entries[instr.signature])
      continue;
    const double more = static_cast<double>(stale.reads[i] + stale.writes[i]) -
                        entries[instr.signature]->stale_bytes();
    added[i] = table.proto().stale_price() * more;
  }
  return added;
}

void PriceStaleBytes(const OpCostTable& table, SimGraph& g) {
  if (!HasStalePrice(table)) return;
  const std::vector<double> added =
      StaleSeconds(table, g, CountStaleBytes(g, table.proto().stale_capacity()));
  for (size_t i = 0; i < added.size(); ++i)
    g.instrs[i].seconds = std::max(0.0, g.instrs[i].seconds + added[i]);
}

}  // namespace pw::cost
