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

}  // namespace pw
