#pragma once
// A KvStore on a Redis server (gloo's RedisStore over hiredis), for ranks on several
// machines. "HOST:PORT[/PREFIX]"; keys live under PREFIX/ (default "pipeweave") so that
// runs sharing a server can use distinct prefixes.

#include <memory>
#include <string>

#include "executor/comm/kv_store.h"

namespace pw {

StatusOr<std::unique_ptr<KvStore>> OpenRedisStore(const std::string& address);

}  // namespace pw
