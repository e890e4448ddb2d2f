#include "executor/scope.h"

#include <algorithm>

namespace pw {

Tensor* Scope::FindLocal(std::string_view name) {
  auto it = vars_.find(std::string(name));
  return it == vars_.end() ? nullptr : &it->second;
}

Tensor* Scope::Find(std::string_view name) {
  for (Scope* s = this; s; s = s->parent_)
    if (Tensor* t = s->FindLocal(name)) return t;
  return nullptr;
}

const Tensor* Scope::Find(std::string_view name) const {
  return const_cast<Scope*>(this)->Find(name);
}

Tensor& Scope::Set(const std::string& name, Tensor tensor) {
  Tensor& slot = vars_[name];
  slot = std::move(tensor);
  return slot;
}

bool Scope::Erase(std::string_view name) { return vars_.erase(std::string(name)) > 0; }

std::vector<std::string> Scope::LocalNames() const {
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& [name, tensor] : vars_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace pw
