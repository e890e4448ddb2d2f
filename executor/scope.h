#pragma once
// Where a running program keeps its tensors, by var name. Scopes nest: parameters and
// optimizer state live in a root scope, each micro-batch gets a child scope for its
// activations and gradients, and a lookup that misses a child falls through to its parent.

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ops/tensor.h"

namespace pw {

class Scope {
 public:
  // `parent` (not owned) must outlive this scope; nullptr for a root scope.
  explicit Scope(Scope* parent = nullptr) : parent_(parent) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  Scope* parent() const { return parent_; }

  // This scope, then its ancestors; nullptr when no scope holds `name`.
  Tensor* Find(std::string_view name);
  const Tensor* Find(std::string_view name) const;
  // This scope only.
  Tensor* FindLocal(std::string_view name);

  // Binds `name` in this scope (replacing a local binding) and returns the stored tensor.
  Tensor& Set(const std::string& name, Tensor tensor);
  // Drops a local binding; true when there was one. Storage is freed with its last user.
  bool Erase(std::string_view name);

  size_t size() const { return vars_.size(); }
  // Local names, sorted (for deterministic iteration).
  std::vector<std::string> LocalNames() const;

 private:
  Scope* parent_;
  std::unordered_map<std::string, Tensor> vars_;
};

}  // namespace pw
