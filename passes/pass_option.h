#pragma once
// Pass options, declared as members of the pass they configure (as in MLIR):
//
//   class AppendBackwardPass : public Pass {
//     Option<std::string> optimizer{this, "optimizer", "sgd or adam", "sgd", {"sgd", "adam"}};
//     Option<double> lr{this, "lr", "learning rate"};  // no default: lr.has_value()
//   };
//
// The pipeline parser sets them from text (`append-backward{optimizer=adam,lr=0.1}`);
// every value is parsed by its type, so a bad value fails before any pass runs.
// Supported types: bool, int, int64_t, double, std::string.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/status.h"

namespace pw {

class Pass;

// The type-erased view the parser, `--list-passes` and pipeline printing use.
class PassOptionBase {
 public:
  PassOptionBase(const PassOptionBase&) = delete;
  PassOptionBase& operator=(const PassOptionBase&) = delete;
  virtual ~PassOptionBase() = default;

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  // "bool", "int", "float" or "string".
  virtual const char* type_name() const = 0;
  // Parses and stores `text`. The error says what was expected, e.g.
  // "expected a number, got 'fast'"; callers add the pass and option names.
  virtual Status Parse(std::string_view text) = 0;
  // Whether the option was given in the pipeline text.
  bool is_set() const { return is_set_; }
  // The current value as pipeline text; empty when there is no value.
  virtual std::string ValueText() const = 0;
  // The default as text ("" when there is none) and the allowed values ({} when any).
  virtual std::string DefaultText() const = 0;
  virtual std::vector<std::string> AllowedTexts() const = 0;

 protected:
  // Registers this option with `owner`, which must outlive it (it is a member).
  PassOptionBase(Pass* owner, std::string name, std::string description);
  void MarkSet() { is_set_ = true; }

 private:
  std::string name_;
  std::string description_;
  bool is_set_ = false;
};

namespace option_detail {
// Typed parsing and printing; defined in pass_option.cc for the supported types.
template <typename T>
struct Traits;
template <>
struct Traits<bool> {
  static const char* Name() { return "bool"; }
  static Status Parse(std::string_view text, bool* out);
  static std::string Print(bool value);
};
template <>
struct Traits<int64_t> {
  static const char* Name() { return "int"; }
  static Status Parse(std::string_view text, int64_t* out);
  static std::string Print(int64_t value);
};
template <>
struct Traits<int> {
  static const char* Name() { return "int"; }
  static Status Parse(std::string_view text, int* out);
  static std::string Print(int value);
};
template <>
struct Traits<double> {
  static const char* Name() { return "float"; }
  static Status Parse(std::string_view text, double* out);
  static std::string Print(double value);
};
template <>
struct Traits<std::string> {
  static const char* Name() { return "string"; }
  static Status Parse(std::string_view text, std::string* out);
  static std::string Print(const std::string& value) { return value; }
};
std::string JoinTexts(const std::vector<std::string>& texts);
}  // namespace option_detail

template <typename T>
class Option : public PassOptionBase {
 public:
  // An option without a default: has_value() stays false until the text sets it.
  Option(Pass* owner, std::string name, std::string description)
      : PassOptionBase(owner, std::move(name), std::move(description)) {}
  // An option with a default and, optionally, the only values it accepts.
  Option(Pass* owner, std::string name, std::string description, T default_value,
         std::vector<T> allowed = {})
      : PassOptionBase(owner, std::move(name), std::move(description)),
        default_(default_value),
        value_(std::move(default_value)),
        allowed_(std::move(allowed)) {}

  bool has_value() const { return value_.has_value(); }
  // The value, or the default, or nothing: for an option without a default, what the text
  // gave if anything.
  const std::optional<T>& optional() const { return value_; }
  // The value, the default when not set, or T{} when neither exists.
  T value() const { return value_.value_or(T{}); }
  operator T() const { return value(); }  // NOLINT: options read like their values
  // Sets the value programmatically (tests, passes building sub-pipelines).
  Option& operator=(T value) {
    value_ = std::move(value);
    MarkSet();
    return *this;
  }

  const char* type_name() const override { return option_detail::Traits<T>::Name(); }

  Status Parse(std::string_view text) override {
    T parsed{};
    PW_RETURN_IF_ERROR(option_detail::Traits<T>::Parse(text, &parsed));
    if (!allowed_.empty()) {
      bool found = false;
      for (const T& a : allowed_) found = found || a == parsed;
      if (!found)
        return InvalidArgument("expected one of ", option_detail::JoinTexts(AllowedTexts()),
                               ", got '", text, "'");
    }
    *this = std::move(parsed);
    return OkStatus();
  }

  std::string ValueText() const override {
    return value_ ? option_detail::Traits<T>::Print(*value_) : std::string();
  }
  std::string DefaultText() const override {
    return default_ ? option_detail::Traits<T>::Print(*default_) : std::string();
  }
  std::vector<std::string> AllowedTexts() const override {
    std::vector<std::string> texts;
    for (const T& a : allowed_) texts.push_back(option_detail::Traits<T>::Print(a));
    return texts;
  }

 private:
  std::optional<T> default_;
  std::optional<T> value_;
  std::vector<T> allowed_;
};

}  // namespace pw
