#include "ir/module.h"

namespace pw {

Program* Module::FindProgram(std::string_view name) {
  for (Program& p : programs_)
    if (p.name() == name) return &p;
  return nullptr;
}

const Program* Module::FindProgram(std::string_view name) const {
  for (const Program& p : programs_)
    if (p.name() == name) return &p;
  return nullptr;
}

const Var* Module::FindVar(std::string_view name, const Program* first) const {
  if (first)
    if (const Var* v = first->FindVar(name)) return v;
  for (const Program& p : programs_)
    if (const Var* v = p.FindVar(name)) return v;
  return nullptr;
}

std::vector<std::string> ModuleInputs(const Module& module) {
  const Attribute* inputs = module.metadata.Find("inputs");
  if (inputs && TypeOf(*inputs) == AttrType::kStrings)
    return std::get<std::vector<std::string>>(*inputs);
  return {"tokens", "labels"};
}

std::string ModuleLoss(const Module& module) { return module.metadata.GetString("loss", "loss"); }

}  // namespace pw
