#pragma once
// What `pipeweave profile` and `pipeweave sim` share: loading a module ready to train
// (the --pipeline passes, or append-backward on a forward-only module) and the estimator
// from --device and --costs.

#include <memory>
#include <string>

#include "cost_model/estimator.h"
#include "ir/module.h"

namespace pw::tools {

// Loads `path`; runs `pipeline` when given, else append-backward (its defaults) when the
// module has no backward ops yet.
StatusOr<Module> LoadTrainingModule(const std::string& path, const std::string& pipeline);

// `device`: cpu, h100, a100 or a DeviceSpec file; `costs`: a cost table file or empty.
StatusOr<std::shared_ptr<cost::Estimator>> MakeEstimator(const std::string& device,
                                                         const std::string& costs);

}  // namespace pw::tools
