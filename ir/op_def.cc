#include "ir/op_def.h"

#include <cassert>

namespace pw {

InferContext::InferContext(const Op& op, std::vector<std::vector<TensorType>> inputs)
    : op_(op), inputs_(std::move(inputs)) {
  outputs_.resize(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i) outputs_[i].resize(op.outputs[i].vars.size());
}

namespace {
const TensorType& EmptyType() {
  static const TensorType kEmpty{DataType::kInvalid, {}};
  return kEmpty;
}
int SlotIndex(const std::vector<Slot>& slots, std::string_view name) {
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].name == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

bool InferContext::HasInput(std::string_view slot) const { return InputCount(slot) > 0; }

size_t InferContext::InputCount(std::string_view slot) const {
  int i = SlotIndex(op_.inputs, slot);
  return i < 0 ? 0 : inputs_[i].size();
}

const TensorType& InferContext::Input(std::string_view slot, size_t j) const {
  int i = SlotIndex(op_.inputs, slot);
  if (i < 0 || j >= inputs_[i].size()) return EmptyType();
  return inputs_[i][j];
}

void InferContext::SetOutput(std::string_view slot, TensorType type, size_t j) {
  int i = SlotIndex(op_.outputs, slot);
  if (i < 0 || j >= outputs_[i].size()) return;  // the op does not produce this output
  outputs_[i][j] = std::move(type);
}

const TensorType& InferContext::Output(std::string_view slot, size_t j) const {
  int i = SlotIndex(op_.outputs, slot);
  if (i < 0 || j >= outputs_[i].size()) return EmptyType();
  return outputs_[i][j];
}

Op& GradContext::Emit(std::string type) {
  Op op;
  op.type = std::move(type);
  op.role = OpRole::kBackward;
  op.stage = forward_.stage;
  op.chunk = forward_.chunk;
  op.origin = OriginName(forward_);
  emitted_.push_back(std::move(op));
  return emitted_.back();
}

void GradContext::Alias(const std::string& input, const std::string& output) {
  aliases_.emplace_back(GradVarName(input), GradVarName(output));
}

std::string GradContext::NewTemp(const std::string& hint, TensorType type) {
  std::string name = hint + "@TMP" + std::to_string(temps_.size());
  Var v;
  v.name = name;
  v.dtype = type.dtype;
  v.shape = std::move(type.shape);
  v.stage = forward_.stage;
  temps_.push_back(std::move(v));
  return name;
}

namespace {
template <typename T>
const T* FindByName(const std::vector<T>& items, std::string_view name) {
  for (const T& item : items)
    if (item.name == name) return &item;
  return nullptr;
}
}  // namespace

const SlotDef* OpDef::FindInput(std::string_view slot) const { return FindByName(inputs, slot); }
const SlotDef* OpDef::FindOutput(std::string_view slot) const { return FindByName(outputs, slot); }
const AttrDef* OpDef::FindAttr(std::string_view name) const { return FindByName(attrs, name); }

void OpRegistry::Register(OpDef def) {
  std::string type = def.type;
  bool inserted = defs_.emplace(std::move(type), std::move(def)).second;
  assert(inserted && "op type registered twice");
  (void)inserted;
}

const OpDef* OpRegistry::Find(std::string_view type) const {
  auto it = defs_.find(type);
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& [type, def] : defs_) types.push_back(type);
  return types;
}

StatusOr<InferContext> InferOpTypes(const OpDef& def, const Op& op,
                                    const std::function<const Var*(const std::string&)>& find_var) {
  std::vector<std::vector<TensorType>> inputs(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    for (const std::string& name : op.inputs[i].vars) {
      const Var* v = find_var(name);
      if (!v) return NotFound("var '", name, "' is not declared");
      inputs[i].push_back(TensorType{v->dtype, v->shape});
    }
  }
  InferContext ctx(op, std::move(inputs));
  if (def.infer) PW_RETURN_IF_ERROR(def.infer(ctx));
  return ctx;
}

}  // namespace pw
