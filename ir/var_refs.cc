#include "ir/var_refs.h"

#include <unordered_map>

namespace pw {

VarRefs::VarRefs(const Program& program) : num_declared_(program.vars().size()) {
  num_ids_ = num_declared_;
  std::unordered_map<std::string_view, int32_t> undeclared;
  auto resolve = [&](const std::string& name) {
    int64_t index = program.VarIndex(name);
    if (index >= 0) return static_cast<int32_t>(index);
    auto [it, inserted] = undeclared.emplace(name, static_cast<int32_t>(num_ids_));
    if (inserted) ++num_ids_;
    return it->second;
  };
  const auto& ops = program.ops();
  input_begin_.reserve(ops.size() + 1);
  output_begin_.reserve(ops.size());
  ids_.reserve(ops.size() * 3);
  for (const Op& op : ops) {
    input_begin_.push_back(ids_.size());
    op.ForEachInput([&](const std::string& v) { ids_.push_back(resolve(v)); });
    output_begin_.push_back(ids_.size());
    op.ForEachOutput([&](const std::string& v) { ids_.push_back(resolve(v)); });
  }
  input_begin_.push_back(ids_.size());
}

}  // namespace pw
