#include "executor/comm/redis_store.h"

#include <gloo/rendezvous/redis_store.h>

#include <charconv>
#include <mutex>

namespace pw {
namespace {

// hiredis connections are not thread-safe; the watchdog thread shares this one.
class RedisStore final : public KvStore {
 public:
  RedisStore(std::unique_ptr<gloo::rendezvous::RedisStore> redis, std::string address,
             std::string prefix)
      : redis_(std::move(redis)), address_(std::move(address)), prefix_(std::move(prefix)) {}

  Status Set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      redis_->set(prefix_ + key, std::vector<char>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      return Unavailable("redis ", address_, ": set '", key, "' failed: ", e.what());
    }
    return OkStatus();
  }

  StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      if (!redis_->check({prefix_ + key})) return std::optional<std::string>();
      std::vector<char> value = redis_->get(prefix_ + key);
      return std::optional<std::string>(std::string(value.begin(), value.end()));
    } catch (const std::exception& e) {
      return Unavailable("redis ", address_, ": get '", key, "' failed: ", e.what());
    }
  }

  std::string Describe() const override { return "redis " + address_; }

 private:
  std::mutex mu_;
  std::unique_ptr<gloo::rendezvous::RedisStore> redis_;
  std::string address_;
  std::string prefix_;
};

}  // namespace

StatusOr<std::unique_ptr<KvStore>> OpenRedisStore(const std::string& spec) {
  std::string address = spec, prefix = "pipeweave";
  if (size_t slash = spec.find('/'); slash != std::string::npos) {
    address = spec.substr(0, slash);
    prefix = spec.substr(slash + 1);
  }
  size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  int port = 6379;
  if (colon != std::string::npos) {
    std::string p = address.substr(colon + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535)
      return InvalidArgument("redis store '", spec, "': bad port '", p, "'");
  }
  if (host.empty()) return InvalidArgument("redis store '", spec, "' has no host");
  try {
    auto redis = std::make_unique<gloo::rendezvous::RedisStore>(host, port);
    return std::unique_ptr<KvStore>(
        std::make_unique<RedisStore>(std::move(redis), address, prefix + "/"));
  } catch (const std::exception& e) {
    return Unavailable("cannot reach redis at ", address, ": ", e.what());
  }
}

}  // namespace pw
