#include "executor/comm/redis_store.h"

#include <charconv>
#include <mutex>
#include <sstream>

#include "executor/comm/resp_connection.h"

namespace pw {
namespace {

// Thread-safe: the connection is used under a lock, one command at a time.
class RedisStore final : public KvStore {
 public:
  RedisStore(std::string host, int port, std::string prefix, StoreOptions options,
             std::unique_ptr<RespConnection> connection)
      : host_(std::move(host)),
        port_(port),
        prefix_(std::move(prefix)),
        options_(options),
        connection_(std::move(connection)) {}

  Status Set(const std::string& key, const std::string& value) override {
    return Call({"SET", prefix_ + key, value}, "set '" + key + "'").status();
  }

  StatusOr<bool> SetIfAbsent(const std::string& key, const std::string& value) override {
    PW_ASSIGN_OR_RETURN(RespReply reply,
                        Call({"SET", prefix_ + key, value, "NX"}, "set '" + key + "' if absent"));
    return reply.kind == RespReply::Kind::kStatus;  // nil: the key was there
  }

  StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    PW_ASSIGN_OR_RETURN(RespReply reply, Call({"GET", prefix_ + key}, "get '" + key + "'"));
    if (reply.kind == RespReply::Kind::kNil) return std::optional<std::string>();
    if (reply.kind != RespReply::Kind::kBulk)
      return Unavailable("redis ", Address(), ": get '", key, "': unexpected reply");
    return std::optional<std::string>(std::move(reply.text));
  }

  std::string Describe() const override { return "redis " + Address(); }

  Status NameConnection(const std::string& name) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      name_ = ConnectionName(name);
    }
    return Call({"CLIENT", "SETNAME", ConnectionName(name)}, "client setname").status();
  }

  StatusOr<std::optional<std::set<std::string>>> ConnectedNames() override {
    PW_ASSIGN_OR_RETURN(RespReply reply, Call({"CLIENT", "LIST"}, "client list"));
    // One line per connection: "id=7 addr=... name=NAME age=...".
    std::set<std::string> names;
    std::istringstream lines(reply.text);
    std::string line;
    const std::string mine = ConnectionName("");
    while (std::getline(lines, line)) {
      size_t at = line.find(" name=");
      if (at == std::string::npos) continue;
      size_t end = line.find(' ', at + 6);
      std::string name = line.substr(at + 6, end == std::string::npos ? end : end - at - 6);
      if (name.rfind(mine, 0) == 0) names.insert(name.substr(mine.size()));
    }
    return std::optional<std::set<std::string>>(std::move(names));
  }

 private:
  std::string Address() const { return StrCat(host_, ":", port_); }
  // Connection names may not hold spaces; the prefix keeps runs on one server apart.
  std::string ConnectionName(const std::string& name) const {
    std::string out = "pw:" + prefix_ + name;
    for (char& c : out)
      if (c == ' ' || c == '\n' || c == '\r') c = '_';
    return out;
  }

  // One command on the connection, connecting again (and renaming it) when the last
  // one failed; an error reply is an error.
  StatusOr<RespReply> Call(const std::vector<std::string>& args, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connection_) {
      auto connection = RespConnection::Connect(host_, port_, options_.connect_timeout);
      if (!connection.ok())
        return Unavailable("cannot reach redis at ", Address(), ": ",
                           connection.status().message());
      connection_ = std::move(*connection);
      if (!name_.empty()) {
        auto named = connection_->Command({"CLIENT", "SETNAME", name_}, options_.command_timeout);
        if (!named.ok()) {
          connection_.reset();
          return Unavailable("redis ", Address(), ": ", what, ": ", named.status().message());
        }
      }
    }
    StatusOr<RespReply> reply = connection_->Command(args, options_.command_timeout);
    if (!reply.ok()) {
      connection_.reset();
      return Unavailable("redis ", Address(), ": ", what, " failed: ", reply.status().message());
    }
    if (reply->kind == RespReply::Kind::kError)
      return Unavailable("redis ", Address(), ": ", what, " failed: ", reply->text);
    return reply;
  }

  const std::string host_;
  const int port_;
  const std::string prefix_;
  const StoreOptions options_;
  std::mutex mu_;
  std::string name_;  // applied to every new connection
  std::unique_ptr<RespConnection> connection_;
};

}  // namespace

StatusOr<std::unique_ptr<KvStore>> OpenRedisStore(const std::string& spec, StoreOptions options) {
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
  auto connection = RespConnection::Connect(host, port, options.connect_timeout);
  if (!connection.ok())
    return Unavailable("cannot reach the redis store at ", address, ": ",
                       connection.status().message(),
                       " (is redis-server running there and listening on that address?)");
  // A server that accepts but does not answer (or is not Redis) is refused here too.
  auto pong = (*connection)->Command({"PING"}, options.connect_timeout);
  if (!pong.ok() || pong->kind != RespReply::Kind::kStatus)
    return Unavailable("the store at ", address, " does not answer as a redis server: ",
                       pong.ok() ? pong->text : pong.status().message());
  return std::unique_ptr<KvStore>(std::make_unique<RedisStore>(std::move(host), port, prefix + "/",
                                                               options, std::move(*connection)));
}

}  // namespace pw
