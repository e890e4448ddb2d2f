#include "ir/rank_layout.h"

#include "ir/status.h"

namespace pw {

RankCoord RankLayout::Coord(int rank) const {
  RankCoord c;
  c.mp = rank % mesh_.mp;
  c.dp = (rank / mesh_.mp) % mesh_.dp;
  c.pp = rank / (mesh_.mp * mesh_.dp);
  return c;
}

int RankLayout::Rank(const RankCoord& c) const {
  return c.pp * (mesh_.dp * mesh_.mp) + c.dp * mesh_.mp + c.mp;
}

std::vector<int> RankLayout::MpGroup(int rank) const {
  RankCoord c = Coord(rank);
  std::vector<int> group;
  for (c.mp = 0; c.mp < mesh_.mp; ++c.mp) group.push_back(Rank(c));
  return group;
}

std::vector<int> RankLayout::DpGroup(int rank) const {
  RankCoord c = Coord(rank);
  std::vector<int> group;
  for (c.dp = 0; c.dp < mesh_.dp; ++c.dp) group.push_back(Rank(c));
  return group;
}

std::vector<int> RankLayout::PpGroup(int rank) const {
  RankCoord c = Coord(rank);
  std::vector<int> group;
  for (c.pp = 0; c.pp < mesh_.pp; ++c.pp) group.push_back(Rank(c));
  return group;
}

std::vector<int> RankLayout::Group(const std::string& kind, int rank) const {
  if (kind == "mp") return MpGroup(rank);
  if (kind == "dp") return DpGroup(rank);
  if (kind == "pp") return PpGroup(rank);
  return {};
}

std::string RankLayout::GroupName(const std::string& kind, int rank) const {
  RankCoord c = Coord(rank);
  if (kind == "mp") return StrCat("mp.pp", c.pp, ".dp", c.dp);
  if (kind == "dp") return StrCat("dp.pp", c.pp, ".mp", c.mp);
  if (kind == "pp") return StrCat("pp.dp", c.dp, ".mp", c.mp);
  return kind;
}

int RankLayout::PipelinePeer(int rank, int pipeline_rank) const {
  RankCoord c = Coord(rank);
  c.pp = pipeline_rank;
  return Rank(c);
}

}  // namespace pw
