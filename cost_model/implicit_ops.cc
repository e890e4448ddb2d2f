#include "cost_model/implicit_ops.h"

namespace pw::cost {

std::set<std::string> OptimizerGradients(
    const std::vector<const Op*>& optimizer_ops, const std::vector<const Op*>& other_ops,
    const std::function<bool(const std::string&)>& is_persistable) {
  std::set<std::string> written, grads;
  for (const Op* op : other_ops)
    op->ForEachOutput([&](const std::string& v) { written.insert(v); });
  for (const Op* op : optimizer_ops)
    op->ForEachInput([&](const std::string& v) {
      if (written.count(v) && !is_persistable(v)) grads.insert(v);
    });
  return grads;
}

}  // namespace pw::cost
