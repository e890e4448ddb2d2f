#pragma once
// Named tensors in one binary file: how a rank saves its parameters and optimizer state
// (`--save-params`) and how tests compare them across layouts.

#include <map>
#include <string>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

Status SaveTensors(const std::string& path, const std::map<std::string, Tensor>& tensors);
StatusOr<std::map<std::string, Tensor>> LoadTensors(const std::string& path);

}  // namespace pw
