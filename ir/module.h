#pragma once
// The unit passes rewrite: named programs, the device mesh and, after scheduling, a plan.

#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/plan.h"
#include "ir/program.h"

namespace pw {

struct Mesh {
  int dp = 1;
  int pp = 1;
  int mp = 1;
  int vpp = 1;  // virtual pipeline chunks per pipeline rank
  int world_size() const { return dp * pp * mp; }
  bool operator==(const Mesh&) const = default;
};

class Module {
 public:
  std::string name;
  Mesh mesh;
  Plan plan;
  AttrList metadata;  // e.g. the model configuration a builder used

  std::vector<Program>& programs() { return programs_; }
  const std::vector<Program>& programs() const { return programs_; }
  Program* FindProgram(std::string_view name);
  const Program* FindProgram(std::string_view name) const;
  Program& AddProgram(Program program) {
    programs_.push_back(std::move(program));
    return programs_.back();
  }
  // The declaration of `name`: `first`'s when it declares it, else the first program's
  // that does (a split module declares a var in every program that uses it), or null.
  const Var* FindVar(std::string_view name, const Program* first = nullptr) const;
  // The single program of an unsplit module (the first program).
  Program& main_program() { return programs_.front(); }
  const Program& main_program() const { return programs_.front(); }

  bool operator==(const Module& other) const {
    return name == other.name && mesh == other.mesh && plan == other.plan &&
           metadata == other.metadata && programs_ == other.programs_;
  }

 private:
  std::vector<Program> programs_;
};

// The vars fed per micro-batch (metadata "inputs"; tokens and labels when absent) and the
// scalar loss (metadata "loss"; "loss" when absent).
std::vector<std::string> ModuleInputs(const Module& module);
std::string ModuleLoss(const Module& module);

}  // namespace pw
