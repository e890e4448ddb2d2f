#pragma once
// A small command-line parser: `--name value`, `--name=value`, boolean `--flag`, and
// positional arguments. Unknown flags and missing values are errors that name the flag.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/number.h"
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
  // Numbers go through ir/number.h: range-checked, NaN and inf refused. Counts and sizes
  // are non-negative and fit an int32 unless a wider range is asked for.
  StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback, int64_t min = 0,
                           int64_t max = kInt32Max) const;
  StatusOr<double> GetDouble(const std::string& name, double fallback, double min = 0,
                             double max = std::numeric_limits<double>::max()) const;
  // A size given in GiB (a decimal > 0, at most 1 PiB), in bytes; 0 when the flag is absent.
  StatusOr<int64_t> GetGibAsBytes(const std::string& name) const;
  // A required value: an error naming the flag when missing.
  StatusOr<std::string> Require(const std::string& name) const;
  StatusOr<int64_t> RequireInt(const std::string& name, int64_t min = 0,
                               int64_t max = kInt32Max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> value_flags_;
  std::set<std::string> switches_;
  std::map<std::string, std::string> aliases_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace pw::tools
