#include "executor/comm/kv_store.h"

#include <thread>

#include "executor/comm/file_store.h"
#include "executor/comm/redis_store.h"

namespace pw {

StatusOr<bool> KvStore::SetIfAbsent(const std::string& key, const std::string& value) {
  PW_ASSIGN_OR_RETURN(std::optional<std::string> existing, TryGet(key));
  if (existing) return false;
  PW_RETURN_IF_ERROR(Set(key, value));
  return true;
}

StatusOr<std::string> KvStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    PW_ASSIGN_OR_RETURN(std::optional<std::string> value, TryGet(key));
    if (value) return *value;
    if (std::chrono::steady_clock::now() > deadline)
      return Unavailable("timed out after ", timeout.count(), " ms waiting for key '", key, "' in ",
                         Describe());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

StatusOr<std::unique_ptr<KvStore>> OpenStore(const std::string& spec, StoreOptions options) {
  const std::string redis = "redis://";
  if (spec.rfind(redis, 0) == 0) return OpenRedisStore(spec.substr(redis.size()), options);
  if (spec.empty())
    return InvalidArgument("empty store (expected a directory or redis://HOST:PORT)");
  return OpenFileStore(spec);
}

}  // namespace pw
