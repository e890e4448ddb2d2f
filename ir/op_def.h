#pragma once
// What an op type is: its slots, attributes, shape and dtype inference, cost counts and
// gradient maker. The definitions themselves live in ops/; ir/ only knows the contract
// so that the verifier and passes can use them without depending on kernels.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/op.h"
#include "ir/status.h"
#include "ir/types.h"
#include "ir/var.h"

namespace pw {

struct SlotDef {
  std::string name;
  bool duplicable = false;  // holds a list of vars (e.g. sum's X)
  bool optional = false;
};

struct AttrDef {
  std::string name;
  AttrType type;
  std::optional<Attribute> default_value;  // none: the attribute is required
};

struct TensorType {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};

// Input types of one op; shape inference fills in its output types.
class InferContext {
 public:
  // inputs[i][j] is the type of var j of op.inputs[i].
  InferContext(const Op& op, std::vector<std::vector<TensorType>> inputs);

  const Op& op() const { return op_; }
  const AttrList& attrs() const { return op_.attrs; }
  bool HasInput(std::string_view slot) const;
  size_t InputCount(std::string_view slot) const;
  // The type of var `i` of an input slot; an empty type when absent.
  const TensorType& Input(std::string_view slot, size_t i = 0) const;
  void SetOutput(std::string_view slot, TensorType type, size_t i = 0);
  // Inferred output types, parallel to op.outputs (empty type where not set).
  const std::vector<std::vector<TensorType>>& outputs() const { return outputs_; }
  const TensorType& Output(std::string_view slot, size_t i = 0) const;

 private:
  const Op& op_;
  std::vector<std::vector<TensorType>> inputs_;
  std::vector<std::vector<TensorType>> outputs_;
};

// FLOPs and bytes moved by one op, for the cost model.
struct OpCost {
  double flops = 0;
  double bytes = 0;
};

// What a grad maker sees and emits. append-backward builds one per forward op whose
// outputs carry a gradient.
class GradContext {
 public:
  GradContext(const Op& forward, std::function<const Var*(const std::string&)> find_var,
              std::function<bool(const std::string&)> needs_grad)
      : forward_(forward), find_var_(std::move(find_var)), needs_grad_(std::move(needs_grad)) {}

  const Op& forward() const { return forward_; }
  const Var* FindVar(const std::string& name) const { return find_var_(name); }
  // The gradient var of a forward var.
  std::string Grad(const std::string& var) const { return GradVarName(var); }
  // Whether the loss needs the gradient of `var` (false for integer inputs and vars no
  // parameter depends on).
  bool NeedsGrad(const std::string& var) const { return needs_grad_(var); }

  // Emits a grad op of `type`; role, stage and chunk are copied from the forward op.
  Op& Emit(std::string type);
  // Declares that the gradient of forward input `input` is exactly the gradient of
  // forward output `output` (no op needed, e.g. bias_add's X).
  void Alias(const std::string& input, const std::string& output);
  // Declares a temporary var the emitted ops use; returns its (unique) name.
  std::string NewTemp(const std::string& hint, TensorType type);

  std::vector<Op>& emitted() { return emitted_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const { return aliases_; }
  const std::vector<Var>& temps() const { return temps_; }

 private:
  const Op& forward_;
  std::function<const Var*(const std::string&)> find_var_;
  std::function<bool(const std::string&)> needs_grad_;
  std::vector<Op> emitted_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // (input grad, output grad)
  std::vector<Var> temps_;
};

// How the amp pass runs an op in mixed precision.
enum class AmpPolicy {
  kLow,   // computes in the low dtype: its floating inputs are cast to it
  kF32,   // computes in f32 (losses, reductions to a scalar, optimizer updates)
  kAsIs,  // its dtypes come from its attributes (fill_constant, cast): left alone
};

struct OpDef {
  std::string type;
  std::string summary;
  std::vector<SlotDef> inputs;
  std::vector<SlotDef> outputs;
  std::vector<AttrDef> attrs;
  // Outputs that name the same var as an input (in-place update, e.g. sgd's ParamOut).
  std::vector<std::pair<std::string, std::string>> inplace;  // (output slot, input slot)
  bool is_communication = false;                             // c_identity, c_allreduce_sum, ...
  // Runs a collective over its `group` whenever it runs (c_allreduce_sum); c_identity
  // communicates only in its gradient.
  bool collective = false;
  AmpPolicy amp = AmpPolicy::kLow;
  // Inputs that are f32 whatever dtype the op computes in (layer_norm's saved statistics).
  std::vector<std::string> f32_inputs;
  std::function<Status(InferContext&)> infer;
  std::function<OpCost(const InferContext&)> cost;  // null: counted as zero
  std::function<Status(GradContext&)> grad;         // null: not differentiable

  const SlotDef* FindInput(std::string_view slot) const;
  const SlotDef* FindOutput(std::string_view slot) const;
  const AttrDef* FindAttr(std::string_view name) const;
};

class OpRegistry {
 public:
  // Adds a definition; a second definition of the same type is a programming error.
  void Register(OpDef def);
  const OpDef* Find(std::string_view type) const;
  std::vector<std::string> Types() const;  // sorted

 private:
  std::map<std::string, OpDef, std::less<>> defs_;
};

// Runs `def.infer` on an op whose input types come from `program`.
StatusOr<InferContext> InferOpTypes(const OpDef& def, const Op& op,
                                    const std::function<const Var*(const std::string&)>& find_var);

}  // namespace pw
