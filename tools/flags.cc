#include "tools/flags.h"

namespace pw::tools {

Flags& Flags::Value(const std::string& name) {
  value_flags_.insert(name);
  return *this;
}
Flags& Flags::Switch(const std::string& name) {
  switches_.insert(name);
  return *this;
}
Flags& Flags::Alias(const std::string& alias, const std::string& name) {
  aliases_[alias] = name;
  return *this;
}

Status Flags::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    if (auto it = aliases_.find(body); it != aliases_.end()) body = it->second;
    if (switches_.count(body)) {
      if (inline_value && *inline_value != "true" && *inline_value != "false")
        return InvalidArgument("flag --", body, " takes no value (got '", *inline_value, "')");
      values_[body] = inline_value.value_or("true");
    } else if (value_flags_.count(body)) {
      if (inline_value) {
        values_[body] = *inline_value;
      } else if (i + 1 < args.size()) {
        values_[body] = args[++i];
      } else {
        return InvalidArgument("flag --", body, " needs a value");
      }
    } else {
      return InvalidArgument("unknown flag '", arg, "'");
    }
  }
  return OkStatus();
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback, int64_t min,
                                int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  StatusOr<int64_t> value = ParseInteger(it->second, min, max);
  if (!value.ok()) return value.status().WithContext(StrCat("flag --", name));
  return value;
}

StatusOr<double> Flags::GetDouble(const std::string& name, double fallback, double min,
                                  double max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  StatusOr<double> value = ParseReal(it->second, min, max);
  if (!value.ok()) return value.status().WithContext(StrCat("flag --", name));
  return value;
}

StatusOr<std::string> Flags::Require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return InvalidArgument("missing required flag --", name);
  return it->second;
}

StatusOr<int64_t> Flags::RequireInt(const std::string& name, int64_t min, int64_t max) const {
  if (!Has(name)) return InvalidArgument("missing required flag --", name);
  return GetInt(name, 0, min, max);
}

StatusOr<int64_t> Flags::GetGibAsBytes(const std::string& name) const {
  if (!Has(name)) return int64_t{0};
  PW_ASSIGN_OR_RETURN(double gib, GetDouble(name, 0, 0, 1024.0 * 1024));
  const auto bytes = static_cast<int64_t>(gib * 1024 * 1024 * 1024);
  if (bytes <= 0) return InvalidArgument("flag --", name, " must be > 0 (GiB per rank), got ", gib);
  return bytes;
}

}  // namespace pw::tools
