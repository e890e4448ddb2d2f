#pragma once
// A Boost.Graph view of a program's dependencies: one vertex per op, edges for
// read-after-write, write-after-read and write-after-write on every var, in program
// order (so the graph is a DAG whose topological orders are the legal reorderings).
// Used by passes that reorder ops or place events, and by the cost model.

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"
#include "ir/status.h"

namespace pw {

enum class DepKind : uint8_t { kRaw = 1, kWar = 2, kWaw = 4 };

struct DepEdgeProps {
  uint8_t kinds = 0;  // bit set of DepKind
};

using DepGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                       boost::no_property, DepEdgeProps>;
using OpIndex = DepGraph::vertex_descriptor;

// Builds the dependency graph of `program` (vertex i is op i). Parallel edges between
// the same two ops are merged; their kinds are or-ed together.
DepGraph BuildDependencyGraph(const Program& program);

// A topological order of the graph (Boost's DFS-based topological_sort).
std::vector<OpIndex> TopologicalOrder(const DepGraph& graph);

// Whether `to` is reachable from `from` (a DFS that stops early).
bool IsReachable(const DepGraph& graph, OpIndex from, OpIndex to);

// All-pairs reachability as bit sets, for repeated queries on graphs up to ~10^5 ops.
class ReachabilityIndex {
 public:
  explicit ReachabilityIndex(const DepGraph& graph);
  bool Reaches(OpIndex from, OpIndex to) const;

 private:
  size_t words_ = 0;
  std::vector<uint64_t> bits_;  // row `from`, bit `to`
};

// The transitive reduction: the fewest edges with the same reachability. Edge
// properties of kept edges are preserved.
DepGraph TransitiveReduction(const DepGraph& graph);

// The heaviest path through the DAG where each op has a weight (e.g. its estimated
// time). Returns the total weight and the ops on the path in order.
struct CriticalPath {
  double length = 0;
  std::vector<OpIndex> ops;
};
CriticalPath LongestWeightedPath(const DepGraph& graph, const std::vector<double>& op_weights);

// The first write after op `index` of a var `of` accepts: (op, var), or nothing.
std::optional<std::pair<size_t, std::string>> FirstWriteAfter(
    const Program& program, size_t index, const std::function<bool(const std::string&)>& of);

// A dependency cycle in def-use terms, ignoring program order: a temporary written once
// links its writer to every reader; persistable vars and vars written several times
// (in-place updates) link each read to the latest earlier write. Returns the ops of one cycle, or
// nothing when there is none.
std::optional<std::vector<size_t>> FindDefUseCycle(const Program& program);
// The same with the program's var references already resolved.
class VarRefs;
std::optional<std::vector<size_t>> FindDefUseCycle(const Program& program, const VarRefs& refs);

}  // namespace pw
