#include "passes/pipeline_parser.h"

#include <cctype>
#include <set>

namespace pw {

namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

std::string Join(const std::vector<std::string>& items) {
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i) joined += (i ? ", " : "") + items[i];
  return joined;
}

std::string Quoted(const std::vector<std::string>& names) {
  std::vector<std::string> quoted;
  for (const std::string& n : names) quoted.push_back("'" + n + "'");
  return Join(quoted);
}

class PipelineParser {
 public:
  PipelineParser(std::string_view text, const PassRegistry& registry)
      : text_(text), registry_(registry) {}

  StatusOr<PassList> Parse() {
    SkipSpace();
    if (AtEnd()) return Error(pos_, "the pipeline is empty");
    PassList passes;
    while (true) {
      PW_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, ParseElement());
      passes.push_back(std::move(pass));
      SkipSpace();
      if (AtEnd()) return passes;
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') return Error(pos_, "unbalanced closing brace '}'");
      return Error(pos_, "unexpected '", Peek(), "' after pass '", passes.back()->name(),
                   "' (separate passes with ',')");
    }
  }

 private:
  StatusOr<std::unique_ptr<Pass>> ParseElement() {
    SkipSpace();
    size_t start = pos_;
    std::string name = ParseName();
    if (name.empty()) {
      if (AtEnd() || Peek() == ',') return Error(start, "empty element (expected a pass name)");
      if (Peek() == '{') return Error(start, "missing pass name before '{'");
      if (Peek() == '}') return Error(start, "unbalanced closing brace '}'");
      return Error(start, "unexpected '", Peek(), "' (expected a pass name)");
    }
    std::unique_ptr<Pass> pass = registry_.Create(name);
    if (!pass) return Error(start, "unknown pass '", name, "'", UnknownPassHint(name));
    SkipSpace();
    if (!AtEnd() && Peek() == '{') PW_RETURN_IF_ERROR(ParseOptions(*pass));
    if (Status s = pass->ValidateOptions(); !s.ok())
      return Error(start, "pass '", name, "': ", s.message());
    return pass;
  }

  Status ParseOptions(Pass& pass) {
    size_t open = pos_++;
    std::set<std::string> seen;
    SkipSpace();
    if (!AtEnd() && Peek() == '}') {  // `pass{}` is the same as `pass`
      ++pos_;
      return OkStatus();
    }
    while (true) {
      SkipSpace();
      size_t start = pos_;
      std::string key = ParseName();
      if (key.empty()) {
        if (AtEnd()) return MissingBrace(open, pass);
        if (Peek() == ',' || Peek() == '}')
          return Error(start, "empty option in the options of pass '", pass.name(), "'");
        return Error(start, "unexpected '", Peek(), "' in the options of pass '", pass.name(),
                     "' (expected an option name)");
      }
      PassOptionBase* option = pass.FindOption(key);
      if (!option) {
        // `a{x=1,b` most likely lacks the '}' before pass b.
        SkipSpace();
        bool has_value = !AtEnd() && Peek() == '=';
        if (!has_value && registry_.Find(key)) return MissingBrace(open, pass);
        return Error(start, UnknownOption(pass, key));
      }
      if (!seen.insert(key).second)
        return Error(start, "option '", key, "' of pass '", pass.name(), "' is given twice");
      SkipSpace();
      if (!AtEnd() && Peek() == '=') {
        ++pos_;
        SkipSpace();
        size_t value_start = pos_;
        PW_ASSIGN_OR_RETURN(std::string value, ParseValue(*option, pass));
        if (Status s = option->Parse(value); !s.ok())
          return Error(value_start, "option '", key, "' of pass '", pass.name(),
                       "': ", s.message());
      } else if (std::string_view(option->type_name()) == "bool") {
        PW_RETURN_IF_ERROR(option->Parse("true"));
      } else {
        return Error(start, "option '", key, "' of pass '", pass.name(), "' needs a value (", key,
                     "=<", option->type_name(), ">)");
      }
      SkipSpace();
      if (AtEnd()) return MissingBrace(open, pass);
      if (Peek() == '}') {
        ++pos_;
        return OkStatus();
      }
      if (Peek() != ',')
        return Error(pos_, "unexpected '", Peek(), "' after option '", key, "' of pass '",
                     pass.name(), "' (separate options with ',')");
      ++pos_;
    }
  }

  StatusOr<std::string> ParseValue(const PassOptionBase& option, const Pass& pass) {
    size_t start = pos_;
    if (!AtEnd() && (Peek() == '"' || Peek() == '\'')) {
      char quote = text_[pos_++];
      size_t close = text_.find(quote, pos_);
      if (close == std::string_view::npos)
        return Error(start, "unterminated ", quote, " in the value of option '", option.name(),
                     "' of pass '", pass.name(), "'");
      std::string value(text_.substr(pos_, close - pos_));
      pos_ = close + 1;
      return value;
    }
    while (!AtEnd() && Peek() != ',' && Peek() != '}') {
      if (Peek() == '{' || Peek() == '=')
        return Error(pos_, "unexpected '", Peek(), "' in the value of option '", option.name(),
                     "' of pass '", pass.name(), "' (quote values that contain it)");
      ++pos_;
    }
    std::string_view value = text_.substr(start, pos_ - start);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
      value.remove_suffix(1);
    if (value.empty())
      return Error(start, "option '", option.name(), "' of pass '", pass.name(),
                   "' needs a value (", option.name(), "=<", option.type_name(), ">)");
    return std::string(value);
  }

  std::string UnknownPassHint(const std::string& name) const {
    std::vector<std::string> similar = registry_.SimilarNames(name);
    if (!similar.empty()) return " (did you mean " + Quoted(similar) + "?)";
    std::vector<std::string> all;
    for (const PassInfo* info : registry_.passes()) all.push_back(info->name);
    return " (known passes: " + Join(all) + ")";
  }

  static std::string UnknownOption(const Pass& pass, const std::string& key) {
    if (pass.options().empty())
      return StrCat("pass '", pass.name(), "' takes no options (got '", key, "')");
    std::vector<std::string> names;
    for (const PassOptionBase* o : pass.options()) names.push_back(o->name());
    return StrCat("pass '", pass.name(), "' has no option '", key, "' (options: ", Join(names),
                  ")");
  }

  Status MissingBrace(size_t open, const Pass& pass) const {
    return Error(open, "missing closing brace '}' for the options of pass '", pass.name(), "'");
  }

  template <typename... Args>
  Status Error(size_t at, const Args&... args) const {
    return InvalidArgument("pass pipeline, column ", at + 1, ": ", args...);
  }

  std::string ParseName() {
    size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(Peek()))) ++pos_;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  std::string_view text_;
  const PassRegistry& registry_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<PassList> ParsePassPipeline(std::string_view text, const PassRegistry& registry) {
  return PipelineParser(text, registry).Parse();
}

std::string PrintPassPipeline(const PassList& passes) {
  std::string text;
  for (size_t i = 0; i < passes.size(); ++i) text += (i ? "," : "") + passes[i]->PipelineText();
  return text;
}

}  // namespace pw
