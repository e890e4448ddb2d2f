#pragma once
// Typed op attributes, kept as an ordered list so that serialization is deterministic.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pw {

using Attribute = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

enum class AttrType { kInt = 0, kFloat, kBool, kString, kInts, kFloats, kStrings };

inline AttrType TypeOf(const Attribute& a) { return static_cast<AttrType>(a.index()); }
const char* AttrTypeName(AttrType type);
std::string AttributeToString(const Attribute& a);

class AttrList {
 public:
  const Attribute* Find(std::string_view name) const;
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  // Inserts or replaces, keeping the first insertion's position.
  void Set(std::string name, Attribute value);
  bool Erase(std::string_view name);

  // Typed access with a default for a missing attribute. An attribute of another type
  // also yields the default; the verifier reports such mismatches.
  int64_t GetInt(std::string_view name, int64_t fallback = 0) const;
  double GetFloat(std::string_view name, double fallback = 0.0) const;
  bool GetBool(std::string_view name, bool fallback = false) const;
  std::string GetString(std::string_view name, const std::string& fallback = "") const;
  std::vector<int64_t> GetInts(std::string_view name) const;

  const std::vector<std::pair<std::string, Attribute>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool operator==(const AttrList& other) const = default;

 private:
  std::vector<std::pair<std::string, Attribute>> items_;
};

}  // namespace pw
