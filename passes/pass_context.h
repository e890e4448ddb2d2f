#pragma once
// What a pass can reach besides the module: the op definitions, statistics counters of
// the running pass, and services other components attach (the extension point).
//
// Extension point: later components hang their objects off the context by type, without
// passes/ depending on them. The cost model and the simulator do
//   context.Attach(std::make_shared<cost::Estimator>(...));
// and a pass that wants estimates asks
//   if (const cost::Estimator* est = context.Find<cost::Estimator>()) ...
// A pass must work (perhaps less well) when the service it asks for is absent.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/op_def.h"

namespace pw {

// The counters one pass run recorded, in the order they were first touched.
struct PassStatistics {
  std::string pass;  // the pass name
  std::vector<std::pair<std::string, int64_t>> counters;
};

class PassContext {
 public:
  explicit PassContext(const OpRegistry& ops) : ops_(ops) {}
  PassContext(const PassContext&) = delete;
  PassContext& operator=(const PassContext&) = delete;

  // Op definitions: slots, attrs, shape inference, grad makers.
  const OpRegistry& ops() const { return ops_; }

  // Adds `delta` to counter `name` of the running pass (e.g. "ops-removed"). Counter
  // names are lower-case words joined by '-'; `--stats` prints them.
  void AddStatistic(std::string_view name, int64_t delta = 1);
  // The counters of the pass running now: a pass that tries a rewrite more than once puts
  // back those from before an attempt it does not keep.
  std::vector<std::pair<std::string, int64_t>>& CurrentCounters();
  // One entry per pass run so far, in run order (a pass that ran twice has two).
  const std::vector<PassStatistics>& statistics() const { return statistics_; }
  // Starts the statistics of a pass run; the PassManager calls it before every pass.
  void BeginPass(std::string_view pass_name);

  // Attaches a service, replacing any earlier one of the same type.
  template <typename T>
  void Attach(std::shared_ptr<T> service) {
    services_[std::type_index(typeid(T))] = std::move(service);
  }
  // The attached service of type T, or nullptr.
  template <typename T>
  T* Find() const {
    auto it = services_.find(std::type_index(typeid(T)));
    return it == services_.end() ? nullptr : static_cast<T*>(it->second.get());
  }

 private:
  const OpRegistry& ops_;
  std::vector<PassStatistics> statistics_;
  std::unordered_map<std::type_index, std::shared_ptr<void>> services_;
};

}  // namespace pw
