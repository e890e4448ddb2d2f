#pragma once
// Whether plans A and B of `pipeweave ab --run` train alike: their losses, step by step in
// every round, and their final parameters, rank file by rank file. Plans of one module
// that only reorder work must agree bit for bit; the comparison says whether they do and,
// where they do not, how far apart they are.

#include <map>
#include <string>
#include <vector>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw::ab {

struct LossComparison {
  bool bit_identical = true;
  double max_rel_diff = 0;  // |a - b| / max(|a|, |b|) over every step of every round
  int worst_round = -1;     // where max_rel_diff was found (0-based), -1 when all equal
  int worst_step = -1;
  double worst_a = 0, worst_b = 0;
  int compared = 0;  // losses compared
};

// `a[round][step]` and `b[round][step]` are the losses of each plan; the shapes must match.
LossComparison CompareLosses(const std::vector<std::vector<double>>& a,
                             const std::vector<std::vector<double>>& b);

struct ParamComparison {
  bool bit_identical = true;
  // Per tensor max|a - b| / max|a| (f32 tensors; other types count only as identical or
  // not), the largest over all tensors compared.
  double max_rel_diff = 0;
  std::string worst;     // "rank 1 'fc1.w'" where max_rel_diff was found
  std::string mismatch;  // non-empty when the files hold different tensors
  int tensors = 0;       // tensors compared
  void Merge(const ParamComparison& other);
};

// Compares two ranks' saved tensors (executor/tensor_file.h); `where` names the rank in
// the result ("rank 1").
ParamComparison CompareTensors(const std::map<std::string, Tensor>& a,
                               const std::map<std::string, Tensor>& b, const std::string& where);

}  // namespace pw::ab
