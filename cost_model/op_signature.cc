#include "cost_model/op_signature.h"

#include <sstream>

namespace pw::cost {
namespace {

void AppendType(std::ostringstream& out, const TensorType& t) {
  out << DataTypeName(t.dtype) << '[';
  for (size_t i = 0; i < t.shape.size(); ++i) out << (i ? "," : "") << t.shape[i];
  out << ']';
}

// Dropout's site salt and shard placement pick which bits of its mask are drawn, not how
// many: every dropout (or fused bias-dropout-add) of one shape is one signature.
bool PicksBitsOnly(const std::string& op_type, const std::string& attr) {
  return (op_type == "dropout" || op_type == "dropout_grad" || op_type == "bias_dropout_add" ||
          op_type == "bias_dropout_add_grad") &&
         (attr == "salt" || attr == "shard_axis" || attr == "shard_count" || attr == "group");
}

std::string AttrVariant(const std::string& op_type, const AttrList& attrs) {
  std::ostringstream out;
  bool first = true;
  for (const auto& [name, value] : attrs.items()) {
    AttrType type = TypeOf(value);
    if (type == AttrType::kFloat || type == AttrType::kFloats) continue;
    if (PicksBitsOnly(op_type, name)) continue;
    out << (first ? "" : ",") << name << '=';
    first = false;
    if (type == AttrType::kBool) {
      out << (std::get<bool>(value) ? 1 : 0);
    } else {
      out << AttributeToString(value);
    }
  }
  return out.str();
}

}  // namespace

StatusOr<OpSignature> SignatureOf(const Op& op, const OpRegistry& registry,
                                  const VarLookup& find_var) {
  const OpDef* def = registry.Find(op.type);
  if (!def) return NotFound("op type '", op.type, "' is not registered");
  OpSignature sig;
  sig.op_type = op.type;
  sig.is_communication = def->is_communication;
  std::ostringstream key;
  key << op.type << '(';
  bool have_dtype = false;
  for (size_t s = 0; s < op.inputs.size(); ++s) {
    key << (s ? ";" : "") << op.inputs[s].name << ':';
    for (size_t j = 0; j < op.inputs[s].vars.size(); ++j) {
      const std::string& name = op.inputs[s].vars[j];
      const Var* var = find_var(name);
      if (!var) return NotFound(op.type, " op: input var '", name, "' is not declared");
      TensorType t{var->dtype, var->shape};
      if (j) key << ',';
      AppendType(key, t);
      if (!have_dtype && IsFloatingType(t.dtype)) {
        sig.dtype = t.dtype;
        have_dtype = true;
      }
      sig.inputs.push_back(std::move(t));
    }
  }
  sig.variant = AttrVariant(op.type, op.attrs);
  key << ')' << sig.variant;
  sig.key = key.str();
  if (def->cost) {
    StatusOr<InferContext> ctx = InferOpTypes(*def, op, find_var);
    if (!ctx.ok()) return ctx.status().WithContext(StrCat("costing ", sig.key));
    OpCost c = def->cost(*ctx);
    sig.flops = c.flops;
    sig.bytes = c.bytes;
  }
  return sig;
}

}  // namespace pw::cost
