#include "ir/graph.h"

#include <algorithm>
#include <boost/graph/topological_sort.hpp>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ir/var_refs.h"

namespace pw {

namespace {

struct VarAccess {
  int64_t last_writer = -1;
  std::vector<int64_t> readers_since_write;
};

// Collects (from, to, kind) dependencies in program order, then builds the graph with
// parallel edges merged.
class EdgeCollector {
 public:
  explicit EdgeCollector(size_t num_ops) : in_edges_(num_ops) {}
  void Add(int64_t from, int64_t to, DepKind kind) {
    if (from < 0 || from == to) return;
    in_edges_[to].push_back({from, static_cast<uint8_t>(kind)});
  }
  DepGraph Build() {
    DepGraph graph(in_edges_.size());
    for (size_t to = 0; to < in_edges_.size(); ++to) {
      auto& edges = in_edges_[to];
      std::sort(edges.begin(), edges.end());
      for (size_t i = 0; i < edges.size();) {
        uint8_t kinds = 0;
        size_t j = i;
        for (; j < edges.size() && edges[j].first == edges[i].first; ++j) kinds |= edges[j].second;
        boost::add_edge(edges[i].first, to, DepEdgeProps{kinds}, graph);
        i = j;
      }
      edges = {};
    }
    return graph;
  }

 private:
  std::vector<std::vector<std::pair<int64_t, uint8_t>>> in_edges_;
};

}  // namespace

DepGraph BuildDependencyGraph(const Program& program) {
  const VarRefs refs(program);
  EdgeCollector edges(refs.num_ops());
  std::vector<VarAccess> access(refs.num_ids());
  for (size_t i = 0; i < refs.num_ops(); ++i) {
    const int64_t op = static_cast<int64_t>(i);
    for (int32_t v : refs.inputs(i)) {
      VarAccess& a = access[v];
      edges.Add(a.last_writer, op, DepKind::kRaw);
      a.readers_since_write.push_back(op);
    }
    for (int32_t v : refs.outputs(i)) {
      VarAccess& a = access[v];
      for (int64_t reader : a.readers_since_write) edges.Add(reader, op, DepKind::kWar);
      edges.Add(a.last_writer, op, DepKind::kWaw);
      a.last_writer = op;
      a.readers_since_write.clear();
    }
  }
  return edges.Build();
}

std::vector<OpIndex> TopologicalOrder(const DepGraph& graph) {
  std::vector<OpIndex> reversed;
  reversed.reserve(boost::num_vertices(graph));
  boost::topological_sort(graph, std::back_inserter(reversed));
  return {reversed.rbegin(), reversed.rend()};
}

bool IsReachable(const DepGraph& graph, OpIndex from, OpIndex to) {
  if (from == to) return true;
  std::vector<char> seen(boost::num_vertices(graph), 0);
  std::vector<OpIndex> stack{from};
  seen[from] = 1;
  while (!stack.empty()) {
    OpIndex u = stack.back();
    stack.pop_back();
    for (auto [e, end] = boost::out_edges(u, graph); e != end; ++e) {
      OpIndex v = boost::target(*e, graph);
      if (v == to) return true;
      if (!seen[v]) {
        seen[v] = 1;
        stack.push_back(v);
      }
    }
  }
  return false;
}

namespace {

// Bit-set reachability, filled in reverse topological order: reach(u) = succ(u) ∪ reach(succ).
std::vector<uint64_t> ReachabilityBits(const DepGraph& graph, const std::vector<OpIndex>& topo,
                                       size_t words) {
  std::vector<uint64_t> bits(words * topo.size(), 0);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    uint64_t* row = &bits[*it * words];
    for (auto [e, end] = boost::out_edges(*it, graph); e != end; ++e) {
      OpIndex v = boost::target(*e, graph);
      row[v / 64] |= uint64_t{1} << (v % 64);
      const uint64_t* sub = &bits[v * words];
      for (size_t w = 0; w < words; ++w) row[w] |= sub[w];
    }
  }
  return bits;
}

}  // namespace

ReachabilityIndex::ReachabilityIndex(const DepGraph& graph) {
  size_t n = boost::num_vertices(graph);
  words_ = (n + 63) / 64;
  bits_ = ReachabilityBits(graph, TopologicalOrder(graph), words_);
}

bool ReachabilityIndex::Reaches(OpIndex from, OpIndex to) const {
  if (from == to) return true;
  return (bits_[from * words_ + to / 64] >> (to % 64)) & 1;
}

DepGraph TransitiveReduction(const DepGraph& graph) {
  const size_t n = boost::num_vertices(graph);
  const size_t words = (n + 63) / 64;
  std::vector<OpIndex> topo = TopologicalOrder(graph);
  std::vector<size_t> position(n);
  for (size_t i = 0; i < n; ++i) position[topo[i]] = i;
  std::vector<uint64_t> reach = ReachabilityBits(graph, topo, words);

  DepGraph reduced(n);
  std::vector<uint64_t> covered(words);
  for (OpIndex u = 0; u < n; ++u) {
    // Visit successors nearest-first: only an earlier one can reach a later one, so a
    // successor already covered by a kept successor's reach set is redundant.
    std::vector<std::pair<size_t, DepGraph::edge_descriptor>> succ;
    for (auto [e, end] = boost::out_edges(u, graph); e != end; ++e)
      succ.emplace_back(position[boost::target(*e, graph)], *e);
    std::sort(succ.begin(), succ.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::fill(covered.begin(), covered.end(), 0);
    for (const auto& [pos, e] : succ) {
      OpIndex v = boost::target(e, graph);
      if ((covered[v / 64] >> (v % 64)) & 1) continue;
      boost::add_edge(u, v, graph[e], reduced);
      const uint64_t* sub = &reach[v * words];
      for (size_t w = 0; w < words; ++w) covered[w] |= sub[w];
    }
  }
  return reduced;
}

CriticalPath LongestWeightedPath(const DepGraph& graph, const std::vector<double>& op_weights) {
  const size_t n = boost::num_vertices(graph);
  CriticalPath result;
  if (n == 0) return result;
  // best[v] is first the heaviest path ending just before v, then (once v is visited in
  // topological order) the heaviest path ending at v.
  std::vector<double> best(n, 0);
  std::vector<int64_t> prev(n, -1);
  for (OpIndex u : TopologicalOrder(graph)) {
    best[u] += op_weights[u];
    for (auto [e, end] = boost::out_edges(u, graph); e != end; ++e) {
      OpIndex v = boost::target(*e, graph);
      if (prev[v] < 0 || best[u] > best[v]) {
        best[v] = best[u];
        prev[v] = static_cast<int64_t>(u);
      }
    }
  }
  OpIndex end = static_cast<OpIndex>(std::max_element(best.begin(), best.end()) - best.begin());
  result.length = best[end];
  for (int64_t v = static_cast<int64_t>(end); v >= 0; v = prev[v])
    result.ops.push_back(static_cast<OpIndex>(v));
  std::reverse(result.ops.begin(), result.ops.end());
  return result;
}

std::optional<std::pair<size_t, std::string>> FirstWriteAfter(
    const Program& program, size_t index, const std::function<bool(const std::string&)>& of) {
  for (size_t k = index + 1; k < program.ops().size(); ++k) {
    std::optional<std::pair<size_t, std::string>> found;
    program.ops()[k].ForEachOutput([&](const std::string& v) {
      if (!found && of(v)) found.emplace(k, v);
    });
    if (found) return found;
  }
  return std::nullopt;
}

std::optional<std::vector<size_t>> FindDefUseCycle(const Program& program) {
  return FindDefUseCycle(program, VarRefs(program));
}

std::optional<std::vector<size_t>> FindDefUseCycle(const Program& program, const VarRefs& refs) {
  const size_t n = refs.num_ops();
  std::vector<int32_t> write_count(refs.num_ids(), 0);
  std::vector<int64_t> sole_writer(refs.num_ids(), -1);
  // Vars with a value before their first write: persistable vars and in-place updates.
  std::vector<char> has_entry_value(refs.num_ids(), 0);
  for (size_t v = 0; v < refs.num_declared(); ++v)
    has_entry_value[v] = program.vars()[v].persistable;
  for (size_t i = 0; i < n; ++i) {
    for (int32_t v : refs.outputs(i)) {
      if (write_count[v]++ == 0) sole_writer[v] = static_cast<int64_t>(i);
      for (int32_t in : refs.inputs(i))
        if (in == v) has_entry_value[v] = 1;
    }
  }
  // Successor lists: writer -> reader.
  std::vector<std::vector<size_t>> succ(n);
  std::vector<int64_t> last_writer(refs.num_ids(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t v : refs.inputs(i)) {
      if (write_count[v] == 0) continue;  // never written: an external input
      int64_t from = write_count[v] == 1 && !has_entry_value[v] ? sole_writer[v] : last_writer[v];
      if (from >= 0 && static_cast<size_t>(from) != i) succ[from].push_back(i);
    }
    for (int32_t v : refs.outputs(i)) last_writer[v] = static_cast<int64_t>(i);
  }
  // Iterative DFS with colours; a grey target closes a cycle.
  std::vector<uint8_t> colour(n, 0);  // 0 white, 1 grey, 2 black
  std::vector<size_t> parent(n, SIZE_MAX);
  for (size_t root = 0; root < n; ++root) {
    if (colour[root]) continue;
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
    colour[root] = 1;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      if (next < succ[u].size()) {
        size_t v = succ[u][next++];
        if (colour[v] == 1) {
          std::vector<size_t> cycle{v};
          for (size_t w = u; w != v; w = parent[w]) cycle.push_back(w);
          std::reverse(cycle.begin() + 1, cycle.end());
          return cycle;
        }
        if (colour[v] == 0) {
          colour[v] = 1;
          parent[v] = u;
          stack.emplace_back(v, 0);
        }
      } else {
        colour[u] = 2;
        stack.pop_back();
      }
    }
  }
  return std::nullopt;
}

}  // namespace pw
