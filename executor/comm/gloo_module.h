#pragma once
// Gloo (and, through it, hiredis, ibverbs and libnl) lives in the module
// libpipeweave_gloo.so, opened the first time a run connects ranks
// through Gloo: the commands that never communicate start without loading those libraries.
//
// The module needs nothing from the program that opens it: the classes below are its whole
// interface, and what crosses it is plain data, Status (whose used parts are inline) and
// the RendezvousStore a caller implements.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ir/status.h"

namespace pw {

// The keys Gloo's rendezvous reads and writes, kept by the caller (a KvStore, scoped to
// one context's prefix).
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Waits for the key until `timeout`.
  virtual StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// A send posted on a context, pending until waited for.
class GlooPendingSend {
 public:
  virtual ~GlooPendingSend() = default;
  // OK once sent; "aborted" or Gloo's error otherwise.
  virtual Status Wait(std::chrono::milliseconds timeout) = 0;
};

// A connected Gloo context of a few ranks; members are addressed by their index in it.
class GlooContext {
 public:
  virtual ~GlooContext() = default;
  // Posts the send of `bytes` bytes at `data` (which must stay alive until waited for).
  virtual StatusOr<std::unique_ptr<GlooPendingSend>> Send(const void* data, size_t bytes,
                                                          int peer_index, uint64_t tag) = 0;
  // Receives `bytes` bytes into `data`, waiting up to `timeout`.
  virtual Status Recv(void* data, size_t bytes, int peer_index, uint64_t tag,
                      std::chrono::milliseconds timeout) = 0;
};

// A rank's TCP device, from which its contexts connect.
class GlooDevice {
 public:
  virtual ~GlooDevice() = default;
  // Connects member `index` of `size` through `store`, every member to every other.
  virtual StatusOr<std::shared_ptr<GlooContext>> ConnectFullMesh(
      RendezvousStore& store, int index, int size, std::chrono::milliseconds timeout) = 0;
};

// What the module hands out: one table per process. Errors carry Gloo's own message only;
// callers say which rank, peer or store it concerns.
struct GlooModule {
  StatusOr<std::unique_ptr<GlooDevice>> (*open_device)(const std::string& hostname);
};

// Opens the module once (later calls return the same result) or says why it cannot.
StatusOr<const GlooModule*> LoadGlooModule();

}  // namespace pw

// The one symbol the module exports.
extern "C" const pw::GlooModule* pw_gloo_module();
