#include "passes/pass_context.h"

namespace pw {

void PassContext::BeginPass(std::string_view pass_name) {
  statistics_.push_back(PassStatistics{std::string(pass_name), {}});
}

std::vector<std::pair<std::string, int64_t>>& PassContext::CurrentCounters() {
  if (statistics_.empty()) BeginPass("");
  return statistics_.back().counters;
}

void PassContext::AddStatistic(std::string_view name, int64_t delta) {
  if (statistics_.empty()) BeginPass("");  // a pass run outside a PassManager
  auto& counters = statistics_.back().counters;
  for (auto& [counter, value] : counters) {
    if (counter == name) {
      value += delta;
      return;
    }
  }
  counters.emplace_back(std::string(name), delta);
}

}  // namespace pw
