#pragma once
// A small command-line parser: `--name value`, `--name=value`, boolean `--flag`, and
// positional arguments. Unknown flags and missing values are errors that name the flag.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/status.h"

namespace pw::tools {

class Flags {
 public:
  // Declares the flags a command accepts (names without dashes).
  Flags& Value(const std::string& name);                            // takes a value
  Flags& Switch(const std::string& name);                           // boolean, no value
  Flags& Alias(const std::string& alias, const std::string& name);  // e.g. "o" -> "output"

  Status Parse(const std::vector<std::string>& args);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // A required value: an error naming the flag when missing.
  StatusOr<std::string> Require(const std::string& name) const;
  StatusOr<int64_t> RequireInt(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> value_flags_;
  std::set<std::string> switches_;
  std::map<std::string, std::string> aliases_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace pw::tools
