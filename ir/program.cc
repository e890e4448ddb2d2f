#include "ir/program.h"

namespace pw {

const Var* Program::FindVar(std::string_view name) const {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? nullptr : &vars_[it->second];
}

Var* Program::FindVar(std::string_view name) {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? nullptr : &vars_[it->second];
}

int64_t Program::VarIndex(std::string_view name) const {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? -1 : static_cast<int64_t>(it->second);
}

bool Program::AddVar(Var var) {
  auto [it, inserted] = var_index_.emplace(var.name, vars_.size());
  if (!inserted) return false;
  vars_.push_back(std::move(var));
  return true;
}

void Program::ReserveVars(size_t n) {
  vars_.reserve(n);
  var_index_.reserve(n);
}

void Program::Reindex() {
  var_index_.clear();
  var_index_.reserve(vars_.size());
  for (size_t i = 0; i < vars_.size(); ++i) var_index_.emplace(vars_[i].name, i);
}

}  // namespace pw
