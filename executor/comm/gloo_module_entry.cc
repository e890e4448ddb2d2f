// The Gloo module's code (built into libpipeweave_gloo.so only): gloo_module.h's classes on
// Gloo's TCP transport. Gloo reports errors by throwing; nothing thrown
// leaves this file.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "executor/comm/gloo_module.h"

namespace pw {
namespace {

// Lets Gloo's rendezvous use the caller's store.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(RendezvousStore& store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status s = store_.Set(key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException(s.message());
  }
  std::vector<char> get(const std::string& key) override {
    StatusOr<std::string> v = store_.Get(key, timeout_);
    if (!v.ok()) throw gloo::IoException(v.status().message());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      StatusOr<std::string> v = store_.Get(key, timeout);
      if (!v.ok()) throw gloo::IoException(v.status().message());
    }
  }

 private:
  RendezvousStore& store_;
  std::chrono::milliseconds timeout_;
};

class PendingSend final : public GlooPendingSend {
 public:
  explicit PendingSend(std::unique_ptr<gloo::transport::UnboundBuffer> buffer)
      : buffer_(std::move(buffer)) {}
  Status Wait(std::chrono::milliseconds timeout) override {
    try {
      if (!buffer_->waitSend(timeout)) return Aborted("aborted");
    } catch (const std::exception& e) {
      return Unavailable(e.what());
    }
    return OkStatus();
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
};

class Context final : public GlooContext {
 public:
  explicit Context(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}

  StatusOr<std::unique_ptr<GlooPendingSend>> Send(const void* data, size_t bytes, int peer_index,
                                                  uint64_t tag) override {
    try {
      auto buffer = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
      buffer->send(peer_index, tag);
      return std::unique_ptr<GlooPendingSend>(std::make_unique<PendingSend>(std::move(buffer)));
    } catch (const std::exception& e) {
      return Unavailable(e.what());
    }
  }
  Status Recv(void* data, size_t bytes, int peer_index, uint64_t tag,
              std::chrono::milliseconds timeout) override {
    try {
      auto buffer = context_->createUnboundBuffer(data, bytes);
      buffer->recv(peer_index, tag);
      if (!buffer->waitRecv(timeout)) return Aborted("aborted");
    } catch (const std::exception& e) {
      return Unavailable(e.what());
    }
    return OkStatus();
  }

 private:
  std::shared_ptr<gloo::Context> context_;
};

class Device final : public GlooDevice {
 public:
  explicit Device(std::shared_ptr<gloo::transport::Device> device) : device_(std::move(device)) {}

  StatusOr<std::shared_ptr<GlooContext>> ConnectFullMesh(
      RendezvousStore& store, int index, int size, std::chrono::milliseconds timeout) override {
    try {
      auto context = std::make_shared<gloo::rendezvous::Context>(index, size);
      context->setTimeout(timeout);
      GlooStore gloo_store(store, timeout);
      context->connectFullMesh(gloo_store, device_);
      return std::shared_ptr<GlooContext>(std::make_shared<Context>(std::move(context)));
    } catch (const std::exception& e) {
      return Unavailable(e.what());
    }
  }

 private:
  std::shared_ptr<gloo::transport::Device> device_;
};

StatusOr<std::unique_ptr<GlooDevice>> OpenDevice(const std::string& hostname) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    return std::unique_ptr<GlooDevice>(
        std::make_unique<Device>(gloo::transport::tcp::CreateDevice(attr)));
  } catch (const std::exception& e) {
    return Unavailable(e.what());
  }
}

constexpr GlooModule kModule = {.open_device = &OpenDevice};

}  // namespace
}  // namespace pw

extern "C" __attribute__((visibility("default"))) const pw::GlooModule* pw_gloo_module() {
  return &pw::kModule;
}
