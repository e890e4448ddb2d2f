#pragma once
// Builds programs op by op. Output vars are declared with the types the op definition
// infers, so a builder never states a shape twice. Errors are deferred: the first one is
// kept and returned by status(), so model builders read as straight-line code.
//
//   ProgramBuilder b(program, ops::Registry());
//   std::string w = b.Parameter("fc.w", {h, f}, init);
//   std::string y = b.Op("matmul").In("X", x).In("Y", w).Out("Out", "fc.out").Build();
//   PW_RETURN_IF_ERROR(b.status());

#include <string>
#include <vector>

#include "ir/op_def.h"
#include "ir/program.h"

namespace pw {

class ProgramBuilder;

class OpBuilder {
 public:
  OpBuilder(ProgramBuilder& builder, std::string type);
  OpBuilder& In(std::string slot, std::string var);
  OpBuilder& In(std::string slot, std::vector<std::string> vars);
  OpBuilder& Out(std::string slot, std::string var);
  OpBuilder& Out(std::string slot, std::vector<std::string> vars);
  OpBuilder& Attr(std::string name, Attribute value);
  OpBuilder& Role(OpRole role);
  OpBuilder& Stream(std::string stream);
  // Appends the op (with the builder's current placement and role unless set here),
  // declares its outputs, and returns the name of its first output.
  std::string Build();

 private:
  ProgramBuilder& builder_;
  pw::Op op_;
  bool role_set_ = false;
};

class ProgramBuilder {
 public:
  ProgramBuilder(Program& program, const OpRegistry& registry)
      : program_(program), registry_(registry) {}

  // Placement and role given to the ops built from now on.
  void SetPlacement(int stage, int chunk) {
    stage_ = stage;
    chunk_ = chunk;
  }
  void SetRole(OpRole role) { role_ = role; }
  int stage() const { return stage_; }
  int chunk() const { return chunk_; }

  // Declares a trainable, persistable var.
  std::string Parameter(const std::string& name, Shape shape, Initializer init,
                        DataType dtype = DataType::kFloat32);
  // Declares a var fed from outside (tokens, labels).
  std::string Input(const std::string& name, DataType dtype, Shape shape);
  // Declares any var; records an error when the name is taken.
  void Declare(Var var);

  OpBuilder Op(std::string type) { return OpBuilder(*this, std::move(type)); }
  // A fresh var name "<hint>", "<hint>_1", ... not declared yet in the program.
  std::string Unique(const std::string& hint);

  const Status& status() const { return status_; }
  Program& program() { return program_; }
  const OpRegistry& registry() const { return registry_; }

 private:
  friend class OpBuilder;
  void Fail(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  std::string Append(pw::Op op);

  Program& program_;
  const OpRegistry& registry_;
  int stage_ = -1;
  int chunk_ = 0;
  OpRole role_ = OpRole::kForward;
  Status status_;
};

}  // namespace pw
