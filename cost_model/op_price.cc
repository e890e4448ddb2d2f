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
    const Var* x = lookup(op.Input("X"));
    price.collective = true;
    price.bytes = x ? static_cast<double>(x->num_bytes()) : 0;
    // A ring all-reduce is a reduce-scatter then an all-gather of the whole buffer, each
    // (n-1) steps of a 1/n piece: either half costs half the all-reduce of the whole (the
    // reduce-scatter's input, the all-gather's output).
    double share = 1;
    if (op.type == "c_reduce_scatter_sum" || op.type == "c_all_gather") share = 0.5;
    if (op.type == "c_all_gather") price.bytes *= static_cast<double>(price.group.size());
    price.inter_node = SpansNodes(estimator.device(), price.group);
    price.seconds = share * estimator.comm()
                                .Time(CommKind::kAllReduce, price.bytes,
                                      static_cast<int>(price.group.size()), price.inter_node)
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
