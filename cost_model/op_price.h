#pragma once
// What one op costs on one rank of a module: a collective over a group of more than one
// rank is priced by the communication model (its group, bytes and whether the group spans
// nodes), any other op by the estimator (table, interpolation or roofline). The simulator
// prices its instructions with it, and passes that weigh a rewrite price ops the same way.

#include <string>
#include <vector>

#include "cost_model/estimator.h"
#include "ir/module.h"

namespace pw::cost {

struct OpPrice {
  double seconds = 0;
  EstimatePath path = EstimatePath::kRoofline;
  std::string key;          // the op's signature key, unless it is a collective
  bool collective = false;  // communication over `group` (more than one rank)
  std::string group_kind;   // "mp", "dp"
  std::vector<int> group;   // global ranks, in group order
  double bytes = 0;         // moved by the collective (an all-gather's: its whole output)
  GroupSpan span;           // where the group sits
  CommKind comm_kind = CommKind::kAllReduce;
};

// The kind of communication a collective op type does (c_all_gather and c_sync_shards,
// c_reduce_scatter_sum; c_shift a send and receive between two members; every other
// collective is priced as an all-reduce).
CommKind CollectiveKindOf(const std::string& op_type);

// `lookup` finds the op's vars (the program's, then the module's).
StatusOr<OpPrice> PriceOp(const Op& op, const Module& module, int rank, const Estimator& estimator,
                          const OpRegistry& registry, const VarLookup& lookup);

}  // namespace pw::cost
