#include "passes/pass.h"

namespace pw {

PassOptionBase* Pass::FindOption(std::string_view name) const {
  for (PassOptionBase* option : options_)
    if (option->name() == name) return option;
  return nullptr;
}

namespace {
// Quotes a value the pipeline parser would otherwise split or trim.
std::string QuoteIfNeeded(const std::string& value) {
  bool plain = !value.empty() && value.front() != ' ' && value.back() != ' ';
  for (char c : value)
    plain = plain && c != ',' && c != '{' && c != '}' && c != '=' && c != '\'' && c != '"';
  if (plain) return value;
  char quote = value.find('"') == std::string::npos ? '"' : '\'';
  return quote + value + quote;
}
}  // namespace

std::string Pass::PipelineText() const {
  std::string text(name());
  std::string options;
  for (const PassOptionBase* option : options_) {
    if (!option->is_set()) continue;
    options +=
        (options.empty() ? "" : ",") + option->name() + "=" + QuoteIfNeeded(option->ValueText());
  }
  if (!options.empty()) text += "{" + options + "}";
  return text;
}

}  // namespace pw
