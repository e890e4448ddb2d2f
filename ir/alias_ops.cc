#include "ir/alias_ops.h"

namespace pw {

std::set<std::string> InPlaceVars(const Program& program) {
  std::set<std::string> vars;
  for (const Op& op : program.ops())
    op.ForEachOutput([&](const std::string& out) {
      op.ForEachInput([&](const std::string& in) {
        if (in == out) vars.insert(out);
      });
    });
  return vars;
}

bool RunsAsView(const Op& op, int group_size, const std::set<std::string>& in_place) {
  const bool alias = op.type == "reshape" || op.type == "c_identity" ||
                     (op.type == "c_allreduce_sum" && group_size == 1);
  if (!alias || op.inputs.size() != 1 || op.outputs.size() != 1) return false;
  const std::string& in = op.Input("X");
  const std::string& out = op.Output("Out");
  return !in.empty() && !out.empty() && in != out && !in_place.count(in) && !in_place.count(out);
}

}  // namespace pw
