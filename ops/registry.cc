#include "ops/registry.h"

#include "ops/defs/register.h"

namespace pw::ops {
namespace {

// Checks an op against its definition's slots and attributes, so every infer function
// (and every kernel, which runs inference first) can rely on them.
Status CheckSignature(const OpDef& def, const Op& op) {
  auto check_slots = [&](const std::vector<SlotDef>& defs, const std::vector<Slot>& slots,
                         const char* kind) -> Status {
    for (const Slot& s : slots) {
      const SlotDef* d = nullptr;
      for (const SlotDef& candidate : defs)
        if (candidate.name == s.name) d = &candidate;
      if (!d) return InvalidArgument(op.type, ": unknown ", kind, " slot ", s.name);
      if (!d->duplicable && s.vars.size() > 1) {
        return InvalidArgument(op.type, ": ", kind, " ", s.name, " takes one var, got ",
                               s.vars.size());
      }
    }
    for (const SlotDef& d : defs) {
      if (d.optional) continue;
      bool present = false;
      for (const Slot& s : slots) present = present || (s.name == d.name && !s.vars.empty());
      if (!present) return InvalidArgument(op.type, ": ", kind, " ", d.name, " is missing");
    }
    return OkStatus();
  };
  PW_RETURN_IF_ERROR(check_slots(def.inputs, op.inputs, "input"));
  PW_RETURN_IF_ERROR(check_slots(def.outputs, op.outputs, "output"));
  // Unknown attributes are allowed: passes may annotate ops.
  for (const AttrDef& a : def.attrs) {
    const Attribute* value = op.attrs.Find(a.name);
    if (!value) {
      if (!a.default_value) return InvalidArgument(op.type, ": attribute ", a.name, " is missing");
      continue;
    }
    AttrType t = TypeOf(*value);
    bool int_as_float = a.type == AttrType::kFloat && t == AttrType::kInt;
    if (t != a.type && !int_as_float) {
      return InvalidArgument(op.type, ": attribute ", a.name, " is ", AttrTypeName(t),
                             ", expected ", AttrTypeName(a.type));
    }
  }
  return OkStatus();
}

void AddSignatureChecks(OpDef& def) {
  auto infer = std::move(def.infer);
  def.infer = [signature = def, infer](InferContext& ctx) -> Status {
    PW_RETURN_IF_ERROR(CheckSignature(signature, ctx.op()));
    return infer ? infer(ctx) : OkStatus();
  };
}

// Collects the families' definitions, wrapping each with the signature checks.
OpRegistry Build() {
  OpRegistry staging;
  RegisterMatmulOps(staging);
  RegisterEmbeddingOps(staging);
  RegisterElementwiseOps(staging);
  RegisterNormOps(staging);
  RegisterRmsNormOps(staging);
  RegisterSwigluOps(staging);
  RegisterRotaryOps(staging);
  RegisterAttentionOps(staging);
  RegisterGqaAttentionOps(staging);
  RegisterSoftmaxOps(staging);
  RegisterMeanOps(staging);
  RegisterFillOps(staging);
  RegisterLayoutOps(staging);
  RegisterCollectiveOps(staging);
  RegisterOptimizerOps(staging);
  RegisterCastOps(staging);
  RegisterVocabParallelOps(staging);
  RegisterLossScalingOps(staging);
  RegisterDropoutOps(staging);
  RegisterBiasFusionOps(staging);
  OpRegistry checked;
  for (const std::string& type : staging.Types()) {
    OpDef def = *staging.Find(type);
    AddSignatureChecks(def);
    checked.Register(std::move(def));
  }
  return checked;
}

}  // namespace

const OpRegistry& Registry() {
  static const OpRegistry* registry = new OpRegistry(Build());
  return *registry;
}

}  // namespace pw::ops
