#pragma once
// Numbers the data edges of a schedule's stage graph so that per-(edge, micro-batch)
// state fits in flat arrays: chain edge s -> s+1 is s, skip edge k is (S-1) + k.

#include <vector>

#include "ir/action.h"

namespace pw {

class EdgeIndex {
 public:
  explicit EdgeIndex(const ActionSchedule& schedule);

  int num_edges() const { return static_cast<int>(edges_.size()); }
  const StageEdge& edge(int e) const { return edges_[e]; }
  // The edge src -> dst, or -1 when the stage graph has none.
  int Find(int src, int dst) const {
    if (dst == src + 1 && src >= 0 && src < num_stages_ - 1) return src;
    for (size_t k = 0; k < skips_; ++k)
      if (edges_[num_stages_ - 1 + k].src == src && edges_[num_stages_ - 1 + k].dst == dst)
        return num_stages_ - 1 + static_cast<int>(k);
    return -1;
  }
  // The edge a send or recv moves data on (-1 when it names no edge).
  int OfComm(const Action& a) const {
    switch (a.type) {
      case ActionType::kSendF:
        return Find(a.stage, a.peer >= 0 ? a.peer : a.stage + 1);
      case ActionType::kRecvF:
        return Find(a.peer >= 0 ? a.peer : a.stage - 1, a.stage);
      case ActionType::kSendB:
        return Find(a.peer >= 0 ? a.peer : a.stage - 1, a.stage);
      case ActionType::kRecvB:
        return Find(a.stage, a.peer >= 0 ? a.peer : a.stage + 1);
      default:
        return -1;
    }
  }
  // Edges into / out of a stage (chain and skip).
  const std::vector<int>& InEdges(int stage) const { return in_[stage]; }
  const std::vector<int>& OutEdges(int stage) const { return out_[stage]; }
  bool has_skips() const { return skips_ > 0; }

 private:
  int num_stages_ = 0;
  size_t skips_ = 0;
  std::vector<StageEdge> edges_;
  std::vector<std::vector<int>> in_, out_;
};

inline EdgeIndex::EdgeIndex(const ActionSchedule& schedule)
    : num_stages_(schedule.num_stages), skips_(schedule.skip_edges.size()) {
  for (int s = 0; s + 1 < num_stages_; ++s) edges_.push_back({s, s + 1});
  edges_.insert(edges_.end(), schedule.skip_edges.begin(), schedule.skip_edges.end());
  in_.resize(num_stages_);
  out_.resize(num_stages_);
  for (int e = 0; e < num_edges(); ++e) {
    if (edges_[e].src < 0 || edges_[e].dst >= num_stages_) continue;
    out_[edges_[e].src].push_back(e);
    in_[edges_[e].dst].push_back(e);
  }
}

}  // namespace pw
