#include "cost_model/op_price.h"

#include "ir/rank_layout.h"

namespace pw::cost {

CommKind CollectiveKindOf(const std::string& op_type) {
  if (op_type == "c_all_gather" || op_type == "c_sync_shards") return CommKind::kAllGather;
  if (op_type == "c_reduce_scatter_sum" || op_type == "c_reduce_scatter_coalesced")
    return CommKind::kReduceScatter;
  if (op_type == "c_shift") return CommKind::kSendRecv;
  return CommKind::kAllReduce;
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
    // The whole buffer: an all-gather's output, a reduce-scatter's or all-reduce's input
    // (a coalesced all-reduce's: every X end to end).
    const bool gather = CollectiveKindOf(op.type) == CommKind::kAllGather;
    price.collective = true;
    price.comm_kind = CollectiveKindOf(op.type);
    if (gather) {
      const Var* out = lookup(op.Output("Out"));
      price.bytes = out ? static_cast<double>(out->num_bytes()) : 0;
    } else if (const std::vector<std::string>* xs = op.FindInput("X")) {
      for (const std::string& v : *xs)
        if (const Var* x = lookup(v)) price.bytes += static_cast<double>(x->num_bytes());
    }
    price.span = SpanOf(estimator.device(), price.group);
    // A shift sends one block to one member while it receives one: a pair's transfer.
    const int members =
        price.comm_kind == CommKind::kSendRecv ? 2 : static_cast<int>(price.group.size());
    price.seconds =
        estimator.comm().Time(price.comm_kind, price.bytes, members, price.span).seconds;
    price.path = EstimatePath::kComm;
    // A reduce-scatter bucket is packed into the transfer's layout and unpacked: local copies.
    if (const std::vector<std::string>* xs = op.FindInput("X");
        op.type == "c_reduce_scatter_coalesced" && xs && xs->size() > 1) {
      PW_ASSIGN_OR_RETURN(OpSignature sig, SignatureOf(op, registry, lookup));
      price.seconds += estimator.OpTime(sig).seconds;
    }
    return price;
  }
  PW_ASSIGN_OR_RETURN(OpSignature sig, SignatureOf(op, registry, lookup));
  Estimate e = estimator.OpTime(sig);
  price.seconds = e.seconds;
  price.path = e.path;
  price.key = std::move(sig.key);
  return price;
}

}  // namespace pw::cost
