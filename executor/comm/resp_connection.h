#pragma once
// One TCP connection to a Redis server, speaking its protocol (RESP) directly: commands go
// out as arrays of bulk strings, one reply is read per command. Every call has a deadline,
// so a congested or dead link turns into an error instead of a thread blocked for good.
// Not thread-safe: one owner (executor/comm/redis_store.cc locks around it).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/status.h"

namespace pw {

struct RespReply {
  enum class Kind { kStatus, kError, kInteger, kBulk, kNil, kArray };
  Kind kind = Kind::kNil;
  std::string text;  // status, error and bulk replies
  int64_t integer = 0;
  std::vector<RespReply> elements;  // arrays
};

class RespConnection {
 public:
  // Resolves `host` (a name or an address) and connects within `timeout`.
  static StatusOr<std::unique_ptr<RespConnection>> Connect(const std::string& host, int port,
                                                           std::chrono::milliseconds timeout);
  ~RespConnection();
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;

  // Sends one command and reads its reply within `timeout`. After an error the connection
  // is unusable (a late reply would be taken for the next command's): make a new one.
  StatusOr<RespReply> Command(const std::vector<std::string>& args,
                              std::chrono::milliseconds timeout);

 private:
  explicit RespConnection(int fd) : fd_(fd) {}
  Status WriteAll(const std::string& bytes, std::chrono::steady_clock::time_point deadline);
  // Reads until `buffer_` holds a whole reply from `pos`; parses it.
  StatusOr<RespReply> ReadReply(std::chrono::steady_clock::time_point deadline);
  Status Fill(std::chrono::steady_clock::time_point deadline);
  // Parses one reply at `pos`; nullopt when more bytes are needed.
  StatusOr<std::optional<RespReply>> Parse(size_t& pos) const;

  int fd_ = -1;
  std::string buffer_;
};

}  // namespace pw
