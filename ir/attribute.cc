#include "ir/attribute.h"

#include <sstream>

namespace pw {

const char* AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kBool:
      return "bool";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "int list";
    case AttrType::kFloats:
      return "float list";
    case AttrType::kStrings:
      return "string list";
  }
  return "unknown";
}

namespace {
template <typename T>
void PrintList(std::ostringstream& out, const std::vector<T>& values) {
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
}
}  // namespace

std::string AttributeToString(const Attribute& a) {
  std::ostringstream out;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out << (v ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::string>) {
          out << '"' << v << '"';
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          out << v;
        } else {
          PrintList(out, v);
        }
      },
      a);
  return out.str();
}

const Attribute* AttrList::Find(std::string_view name) const {
  for (const auto& [key, value] : items_) {
    if (key == name) return &value;
  }
  return nullptr;
}

void AttrList::Set(std::string name, Attribute value) {
  for (auto& [key, existing] : items_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
}

bool AttrList::Erase(std::string_view name) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    if (it->first == name) {
      items_.erase(it);
      return true;
    }
  }
  return false;
}

namespace {
template <typename T>
const T* Typed(const AttrList& list, std::string_view name) {
  const Attribute* a = list.Find(name);
  return a ? std::get_if<T>(a) : nullptr;
}
}  // namespace

int64_t AttrList::GetInt(std::string_view name, int64_t fallback) const {
  const int64_t* v = Typed<int64_t>(*this, name);
  return v ? *v : fallback;
}
double AttrList::GetFloat(std::string_view name, double fallback) const {
  if (const double* v = Typed<double>(*this, name)) return *v;
  if (const int64_t* v = Typed<int64_t>(*this, name)) return static_cast<double>(*v);
  return fallback;
}
bool AttrList::GetBool(std::string_view name, bool fallback) const {
  const bool* v = Typed<bool>(*this, name);
  return v ? *v : fallback;
}
std::string AttrList::GetString(std::string_view name, const std::string& fallback) const {
  const std::string* v = Typed<std::string>(*this, name);
  return v ? *v : fallback;
}
std::vector<int64_t> AttrList::GetInts(std::string_view name) const {
  const std::vector<int64_t>* v = Typed<std::vector<int64_t>>(*this, name);
  return v ? *v : std::vector<int64_t>{};
}

}  // namespace pw
