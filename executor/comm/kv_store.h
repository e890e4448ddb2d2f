#pragma once
// A small key-value store shared by the ranks of one run: rendezvous for Gloo contexts,
// heartbeats and the abort notice. Two kinds: a directory on a file system every rank
// sees (one machine, or a shared mount) and a Redis server (several machines).
//
//   OpenStore("/tmp/run1")                 a directory (created if missing)
//   OpenStore("redis://10.0.0.5:6379/run1") a Redis server; keys are prefixed "run1/"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "ir/status.h"

namespace pw {

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // The value, or nullopt when the key is not set; never blocks on the key.
  virtual StatusOr<std::optional<std::string>> TryGet(const std::string& key) = 0;
  // "directory /tmp/run1", "redis 10.0.0.5:6379"
  virtual std::string Describe() const = 0;

  // Waits for the key, polling; an error naming the key after `timeout`.
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
};

StatusOr<std::unique_ptr<KvStore>> OpenStore(const std::string& spec);

}  // namespace pw
