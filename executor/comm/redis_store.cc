#include "executor/comm/redis_store.h"

#include <charconv>
#include <mutex>

#include "executor/comm/gloo_module.h"

namespace pw {
namespace {

// hiredis connections are not thread-safe; the watchdog thread shares this one. The
// connection itself is the Gloo module's (gloo's RedisStore).
class RedisStore final : public KvStore {
 public:
  RedisStore(std::unique_ptr<RedisKeys> redis, std::string address, std::string prefix)
      : redis_(std::move(redis)), address_(std::move(address)), prefix_(std::move(prefix)) {}

  Status Set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    Status s = redis_->Set(prefix_ + key, value);
    if (!s.ok()) return Unavailable("redis ", address_, ": set '", key, "' failed: ", s.message());
    return OkStatus();
  }

  StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    StatusOr<std::string> value = redis_->TryGet(prefix_ + key);
    if (value.ok()) return std::optional<std::string>(std::move(value).value());
    if (value.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
    return Unavailable("redis ", address_, ": get '", key, "' failed: ", value.status().message());
  }

  std::string Describe() const override { return "redis " + address_; }

 private:
  std::mutex mu_;
  std::unique_ptr<RedisKeys> redis_;
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
  PW_ASSIGN_OR_RETURN(const GlooModule* gloo, LoadGlooModule());
  StatusOr<std::unique_ptr<RedisKeys>> redis = gloo->connect_redis(host, port);
  if (!redis.ok())
    return Unavailable("cannot reach redis at ", address, ": ", redis.status().message());
  return std::unique_ptr<KvStore>(
      std::make_unique<RedisStore>(std::move(redis).value(), address, prefix + "/"));
}

}  // namespace pw
