#pragma once
// One op ready to run alone, outside any program: synthetic values for its inputs, a
// slot per output and the kernel context over them. The profilers time kernels on it, on
// the CPU and on a GPU; `Upload` and `Allocate` say where the tensors live.

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/var.h"
#include "ops/kernel.h"
#include "ops/tensor.h"

namespace pw::ops {

// Values no kernel trips over: ids 0 for integer inputs (valid token, label and index),
// small positive floats (square roots and logs stay finite, nothing is denormal), rounded
// to the var's dtype when it is bf16 or f16.
Tensor SyntheticTensor(const Var& var, std::mt19937& rng);

class OpRun {
 public:
  // Makes a host tensor usable by the kernel (the identity on the CPU).
  using Upload = std::function<StatusOr<Tensor>(Tensor host)>;
  // A fresh output tensor of a declaration, as the runtime would allocate it.
  using Allocate = std::function<StatusOr<Tensor>(const Var& decl)>;

  // `op` must outlive the run; `vars` declares every var it reads or writes; `label` names
  // the op in errors (its signature key).
  static StatusOr<std::unique_ptr<OpRun>> Create(const Op& op, const std::vector<Var>& vars,
                                                 const std::string& label, const Upload& upload);

  // Drops the previous run's outputs, then gives every output that is not in place (an
  // output naming an input var) a fresh tensor.
  void ReleaseOutputs();
  Status AllocateOutputs(const Allocate& allocate);

  KernelContext& context() { return ctx_; }
  // The inputs that are activations (not persistable): what a step has just written.
  const std::vector<const Tensor*>& activations() const { return activations_; }

 private:
  explicit OpRun(const Op& op) : ctx_{op, {}, {}, nullptr} {}

  std::vector<Var> output_decls_;
  std::map<std::string, Tensor> inputs_;  // node-based: the context points into it
  std::vector<Tensor> fresh_;
  std::vector<bool> in_place_;
  std::vector<const Tensor*> activations_;
  KernelContext ctx_;
};

}  // namespace pw::ops
