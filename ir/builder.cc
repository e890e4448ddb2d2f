#include "ir/builder.h"

namespace pw {

OpBuilder::OpBuilder(ProgramBuilder& builder, std::string type) : builder_(builder) {
  op_.type = std::move(type);
}

OpBuilder& OpBuilder::In(std::string slot, std::string var) {
  op_.SetInput(std::move(slot), {std::move(var)});
  return *this;
}
OpBuilder& OpBuilder::In(std::string slot, std::vector<std::string> vars) {
  op_.SetInput(std::move(slot), std::move(vars));
  return *this;
}
OpBuilder& OpBuilder::Out(std::string slot, std::string var) {
  op_.SetOutput(std::move(slot), {std::move(var)});
  return *this;
}
OpBuilder& OpBuilder::Out(std::string slot, std::vector<std::string> vars) {
  op_.SetOutput(std::move(slot), std::move(vars));
  return *this;
}
OpBuilder& OpBuilder::Attr(std::string name, Attribute value) {
  op_.attrs.Set(std::move(name), std::move(value));
  return *this;
}
OpBuilder& OpBuilder::Role(OpRole role) {
  op_.role = role;
  role_set_ = true;
  return *this;
}
OpBuilder& OpBuilder::Stream(std::string stream) {
  op_.stream = std::move(stream);
  return *this;
}

std::string OpBuilder::Build() {
  if (!role_set_) op_.role = builder_.role_;
  op_.stage = builder_.stage_;
  op_.chunk = builder_.chunk_;
  return builder_.Append(std::move(op_));
}

std::string ProgramBuilder::Parameter(const std::string& name, Shape shape, Initializer init,
                                      DataType dtype) {
  Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.persistable = true;
  v.is_parameter = true;
  v.init = std::move(init);
  v.stage = stage_;
  Declare(std::move(v));
  return name;
}

std::string ProgramBuilder::Input(const std::string& name, DataType dtype, Shape shape) {
  Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.stage = stage_;
  Declare(std::move(v));
  return name;
}

void ProgramBuilder::Declare(Var var) {
  std::string name = var.name;
  if (!program_.AddVar(std::move(var))) Fail(InvalidArgument("var '", name, "' declared twice"));
}

std::string ProgramBuilder::Unique(const std::string& hint) {
  if (!program_.HasVar(hint)) return hint;
  for (int i = 1;; ++i) {
    std::string name = hint + "_" + std::to_string(i);
    if (!program_.HasVar(name)) return name;
  }
}

std::string ProgramBuilder::Append(pw::Op op) {
  std::string first = op.outputs.empty() || op.outputs[0].vars.empty() ? "" : op.outputs[0].vars[0];
  if (!status_.ok()) return first;
  const OpDef* def = registry_.Find(op.type);
  if (!def) {
    Fail(InvalidArgument("unknown op type '", op.type, "'"));
    return first;
  }
  auto inferred =
      InferOpTypes(def[0], op, [&](const std::string& n) { return program_.FindVar(n); });
  if (!inferred.ok()) {
    Fail(inferred.status().WithContext(StrCat("op ", program_.ops().size(), " (", op.type, ")")));
    return first;
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    for (size_t j = 0; j < op.outputs[i].vars.size(); ++j) {
      const std::string& name = op.outputs[i].vars[j];
      if (program_.HasVar(name)) continue;  // in-place update of an existing var
      Var v;
      v.name = name;
      v.dtype = inferred->outputs()[i][j].dtype;
      v.shape = inferred->outputs()[i][j].shape;
      v.stage = op.stage;
      program_.AddVar(std::move(v));
    }
  }
  program_.AddOp(std::move(op));
  return first;
}

}  // namespace pw
