#pragma once
// A KvStore on a Redis server, for ranks on several machines. "HOST:PORT[/PREFIX]"; keys
// live under PREFIX/ (default "pipeweave") so that runs sharing a server can use distinct
// prefixes. Set overwrites (heartbeats rewrite their key every second). Each store is one
// connection (executor/comm/resp_connection.h) with deadlines on every command; a failed
// command drops it and the next call connects again.

#include <chrono>
#include <memory>
#include <string>

#include "executor/comm/kv_store.h"

namespace pw {

StatusOr<std::unique_ptr<KvStore>> OpenRedisStore(const std::string& address,
                                                  StoreOptions options = {});

}  // namespace pw
