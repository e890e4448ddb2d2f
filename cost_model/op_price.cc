#include "cost_model/op_price.h"

#include "ir/rank_layout.h"

namespace pw::cost {

bool SpansNodes(const DeviceSpec& device, const std::vector<int>& group) {
  for (int r : group)
    if (!SameNode(device, group.front(), r)) return true;
  return false;
}

StatusOr<OpPrice> PriceOp(const Op& op, const Module& module, int rank, const Estimator& estimator,
                          const OpRegistry& registry, const VarLookup& lookup) {
  OpPrice price;
  const OpDef* def = registry.Find(op.type);
  if (def && def->collective) {
    price.group_kind = op.attrs.GetString("group", "mp");
    price.group = RankLayout(module.mesh).Group(price.group_kind, rank);
  }
  // A collective over one rank is the identity its kernel computes locally.
  if (price.group.size() > 1) {
    // The whole buffer: an all-gather's output, a reduce-scatter's or all-reduce's input.
    const bool gather = op.type == "c_all_gather";
    const Var* x = lookup(gather ? op.Output("Out") : op.Input("X"));
    price.collective = true;
    price.kind = gather                              ? CommKind::kAllGather
                 : op.type == "c_reduce_scatter_sum" ? CommKind::kReduceScatter
                                                     : CommKind::kAllReduce;
    price.bytes = x ? static_cast<double>(x->num_bytes()) : 0;
    price.inter_node = SpansNodes(estimator.device(), price.group);
    price.seconds =
        estimator.comm()
            .Time(price.kind, price.bytes, static_cast<int>(price.group.size()), price.inter_node)
            .seconds;
    price.path = EstimatePath::kComm;
    return price;
  }
  PW_ASSIGN_OR_RETURN(OpSignature sig, SignatureOf(op, registry, lookup));
  Estimate e = estimator.OpTime(sig);
  price.seconds = e.seconds;
  price.path = e.path;
  return price;
}

}  // namespace pw::cost
