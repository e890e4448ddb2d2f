#include "ab/ab_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pw::ab {
namespace {

// 0 for equal values (NaN and NaN included), infinite when only one is NaN.
double RelativeDiff(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  if (std::isnan(a) || std::isnan(b)) return INFINITY;
  double scale = std::max(std::fabs(a), std::fabs(b));
  return std::isfinite(scale) && scale > 0 ? std::fabs(a - b) / scale : INFINITY;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// max|a - b| / max|a| over the elements of two f32 tensors of one shape.
double TensorRelativeDiff(const Tensor& a, const Tensor& b) {
  double max_diff = 0, max_abs = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.f32()[i], y = b.f32()[i];
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (!std::isnan(x)) max_diff = std::max(max_diff, std::fabs(x - y));
    max_abs = std::max(max_abs, std::fabs(x));
  }
  if (max_diff == 0) return 0;
  return max_abs > 0 ? max_diff / max_abs : INFINITY;
}

}  // namespace

LossComparison CompareLosses(const std::vector<std::vector<double>>& a,
                             const std::vector<std::vector<double>>& b) {
  LossComparison out;
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    for (size_t s = 0; s < a[r].size() && s < b[r].size(); ++s) {
      ++out.compared;
      double x = a[r][s], y = b[r][s];
      if (std::memcmp(&x, &y, sizeof(double)) == 0) continue;
      out.bit_identical = false;
      double d = RelativeDiff(x, y);
      if (out.worst_round < 0 || d > out.max_rel_diff) {
        out.max_rel_diff = d;
        out.worst_round = static_cast<int>(r);
        out.worst_step = static_cast<int>(s);
        out.worst_a = x;
        out.worst_b = y;
      }
    }
  }
  return out;
}

void ParamComparison::Merge(const ParamComparison& other) {
  bit_identical = bit_identical && other.bit_identical;
  if (!other.worst.empty() && (worst.empty() || other.max_rel_diff > max_rel_diff)) {
    max_rel_diff = other.max_rel_diff;
    worst = other.worst;
  }
  if (mismatch.empty()) mismatch = other.mismatch;
  tensors += other.tensors;
}

ParamComparison CompareTensors(const std::map<std::string, Tensor>& a,
                               const std::map<std::string, Tensor>& b, const std::string& where) {
  ParamComparison out;
  for (const auto& [name, ta] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      out.bit_identical = false;
      if (out.mismatch.empty()) out.mismatch = StrCat(where, ": B saved no '", name, "'");
      continue;
    }
    const Tensor& tb = it->second;
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) {
      out.bit_identical = false;
      if (out.mismatch.empty())
        out.mismatch = StrCat(where, ": '", name, "' has another type or shape in B");
      continue;
    }
    ++out.tensors;
    if (SameBits(ta, tb)) continue;
    out.bit_identical = false;
    double d = ta.dtype() == DataType::kFloat32 ? TensorRelativeDiff(ta, tb) : INFINITY;
    if (out.worst.empty() || d > out.max_rel_diff) {
      out.max_rel_diff = d;
      out.worst = StrCat(where, " '", name, "'");
    }
  }
  for (const auto& [name, tb] : b) {
    if (a.count(name)) continue;
    out.bit_identical = false;
    if (out.mismatch.empty()) out.mismatch = StrCat(where, ": A saved no '", name, "'");
  }
  return out;
}

}  // namespace pw::ab
