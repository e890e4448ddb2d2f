#pragma once
// Where each global rank sits in the mesh, and the groups it belongs to. Megatron's
// order: the model-parallel index varies fastest, then data-parallel, then pipeline, so
// an mp group is a run of adjacent ranks (on one machine when ranks fill machines).
//
//   rank = pp_index * (dp * mp) + dp_index * mp + mp_index

#include <string>
#include <vector>

#include "ir/module.h"

namespace pw {

struct RankCoord {
  int dp = 0;
  int pp = 0;  // the pipeline rank (a plan's RankPlan.rank)
  int mp = 0;
  bool operator==(const RankCoord&) const = default;
};

class RankLayout {
 public:
  explicit RankLayout(const Mesh& mesh) : mesh_(mesh) {}

  const Mesh& mesh() const { return mesh_; }
  int world_size() const { return mesh_.world_size(); }
  RankCoord Coord(int rank) const;
  int Rank(const RankCoord& coord) const;

  // Global ranks of a group, in group-rank order, and a stable name for it.
  std::vector<int> MpGroup(int rank) const;
  std::vector<int> DpGroup(int rank) const;
  std::vector<int> PpGroup(int rank) const;                         // indexed by pipeline rank
  std::vector<int> Group(const std::string& kind, int rank) const;  // "mp", "dp", "pp"
  std::string GroupName(const std::string& kind, int rank) const;   // e.g. "mp.pp1.dp0"

  // The global rank of pipeline rank `pipeline_rank` in `rank`'s pipeline.
  int PipelinePeer(int rank, int pipeline_rank) const;

 private:
  Mesh mesh_;
};

}  // namespace pw
