#pragma once
// Status and StatusOr: how every fallible call in pipeweave reports an error. Errors
// carry one line that names what is wrong, ready to print to a user.

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace pw {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: file, flag, pipeline text, option
  kNotFound,
  kFailedPrecondition,  // the module is not in the state a pass needs
  kDataLoss,            // truncated or corrupted file
  kUnimplemented,
  kInternal,
  kUnavailable,  // a peer or a store cannot be reached
  kAborted,      // another rank failed
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"
  std::string ToString() const;
  // Prepends context: "while loading x.pbtxt: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

// Builds a message from streamable pieces: InvalidArgument("op ", i, " has no slot ", s).
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return Status(StatusCode::kInvalidArgument, StrCat(args...));
}
template <typename... Args>
Status NotFound(const Args&... args) {
  return Status(StatusCode::kNotFound, StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, StrCat(args...));
}
template <typename... Args>
Status DataLoss(const Args&... args) {
  return Status(StatusCode::kDataLoss, StrCat(args...));
}
template <typename... Args>
Status Unimplemented(const Args&... args) {
  return Status(StatusCode::kUnimplemented, StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return Status(StatusCode::kInternal, StrCat(args...));
}
template <typename... Args>
Status Unavailable(const Args&... args) {
  return Status(StatusCode::kUnavailable, StrCat(args...));
}
template <typename... Args>
Status Aborted(const Args&... args) {
  return Status(StatusCode::kAborted, StrCat(args...));
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : value_(value) {}
  StatusOr(T&& value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pw

#define PW_CONCAT_INNER_(a, b) a##b
#define PW_CONCAT_(a, b) PW_CONCAT_INNER_(a, b)

#define PW_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::pw::Status pw_status_ = (expr);        \
    if (!pw_status_.ok()) return pw_status_; \
  } while (0)

#define PW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define PW_ASSIGN_OR_RETURN(lhs, expr) \
  PW_ASSIGN_OR_RETURN_IMPL_(PW_CONCAT_(pw_statusor_, __LINE__), lhs, expr)
