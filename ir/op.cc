#include "ir/op.h"

#include "ir/var.h"

namespace pw {

const char* OpRoleName(OpRole role) {
  switch (role) {
    case OpRole::kUnspecified:
      return "unspecified";
    case OpRole::kForward:
      return "forward";
    case OpRole::kBackward:
      return "backward";
    case OpRole::kOptimize:
      return "optimize";
    case OpRole::kLoss:
      return "loss";
    case OpRole::kCommunication:
      return "communication";
  }
  return "unknown";
}

namespace {
const std::vector<std::string>* FindSlot(const std::vector<Slot>& slots, std::string_view name) {
  for (const Slot& s : slots) {
    if (s.name == name) return &s.vars;
  }
  return nullptr;
}
const std::string& Single(const std::vector<std::string>* vars) {
  static const std::string kEmpty;
  return vars && !vars->empty() ? vars->front() : kEmpty;
}
void SetSlot(std::vector<Slot>& slots, std::string name, std::vector<std::string> vars) {
  for (Slot& s : slots) {
    if (s.name == name) {
      s.vars = std::move(vars);
      return;
    }
  }
  slots.push_back(Slot{std::move(name), std::move(vars)});
}
void RenameIn(std::vector<Slot>& slots, const std::string& from, const std::string& to) {
  for (Slot& s : slots)
    for (std::string& v : s.vars)
      if (v == from) v = to;
}
}  // namespace

const std::vector<std::string>* Op::FindInput(std::string_view slot) const {
  return FindSlot(inputs, slot);
}
const std::vector<std::string>* Op::FindOutput(std::string_view slot) const {
  return FindSlot(outputs, slot);
}
const std::string& Op::Input(std::string_view slot) const { return Single(FindInput(slot)); }
const std::string& Op::Output(std::string_view slot) const { return Single(FindOutput(slot)); }

Op& Op::SetInput(std::string slot, std::vector<std::string> vars) {
  SetSlot(inputs, std::move(slot), std::move(vars));
  return *this;
}
Op& Op::SetOutput(std::string slot, std::vector<std::string> vars) {
  SetSlot(outputs, std::move(slot), std::move(vars));
  return *this;
}
void Op::RenameInput(const std::string& from, const std::string& to) { RenameIn(inputs, from, to); }
void Op::RenameOutput(const std::string& from, const std::string& to) {
  RenameIn(outputs, from, to);
}

static constexpr std::string_view kGradSuffix = "@GRAD";

std::string GradVarName(const std::string& name) { return name + std::string(kGradSuffix); }
std::string OriginName(const Op& op) {
  for (const Slot& s : op.outputs)
    if (!s.vars.empty()) return s.vars.front();
  return "";
}

bool IsGradVarName(const std::string& name) {
  return name.size() > kGradSuffix.size() &&
         std::string_view(name).substr(name.size() - kGradSuffix.size()) == kGradSuffix;
}
std::string ForwardVarName(const std::string& grad_name) {
  return IsGradVarName(grad_name) ? grad_name.substr(0, grad_name.size() - kGradSuffix.size())
                                  : grad_name;
}

}  // namespace pw
