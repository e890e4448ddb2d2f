#include "cost_model/op_price.h"

#include "ir/rank_layout.h"

namespace pw::cost {

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
    price.span = SpanOf(estimator.device(), price.group);
    price.seconds = estimator.comm()
                        .Time(CommKind::kAllReduce, price.bytes,
                              static_cast<int>(price.group.size()), price.span)
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
