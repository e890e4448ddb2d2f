#pragma once
// A KvStore in a directory: one file per key, written to a temporary name and renamed,
// so a reader sees a whole value or none.

#include <memory>
#include <string>

#include "executor/comm/kv_store.h"

namespace pw {

StatusOr<std::unique_ptr<KvStore>> OpenFileStore(const std::string& directory);

}  // namespace pw
