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
#include <set>
#include <string>

#include "ir/status.h"

namespace pw {

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Sets the key unless it is set, atomically where the store can (the first of several
  // writers wins); returns whether this call set it.
  virtual StatusOr<bool> SetIfAbsent(const std::string& key, const std::string& value);
  // The value, or nullopt when the key is not set; never blocks on the key.
  virtual StatusOr<std::optional<std::string>> TryGet(const std::string& key) = 0;
  // "directory /tmp/run1", "redis 10.0.0.5:6379"
  virtual std::string Describe() const = 0;

  // Where the store is a server, it sees its clients' connections: a process that is gone
  // has closed its own (the kernel closes them), one that is stopped or slow has not.
  // NameConnection labels this client's connection (kept across reconnects);
  // ConnectedNames lists the labels of the connections open now, or nullopt where the
  // store cannot tell (a directory).
  virtual Status NameConnection(const std::string& name) { return OkStatus(); }
  virtual StatusOr<std::optional<std::set<std::string>>> ConnectedNames() {
    return std::optional<std::set<std::string>>();
  }

  // Waits for the key, polling; an error naming the key after `timeout`.
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
};

struct StoreOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // How long one command may wait for its reply (a server's store; a directory ignores it).
  std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};
};

// Each call opens a store of its own (for a server: its own connection).
StatusOr<std::unique_ptr<KvStore>> OpenStore(const std::string& spec, StoreOptions options = {});

}  // namespace pw
