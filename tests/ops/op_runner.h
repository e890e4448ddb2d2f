#pragma once
// Test-only: runs a list of ops with the CPU kernels over a name -> Tensor map, allocating
// every output from the registry's shape inference. Gradient aliases (dX == dOut) are
// honoured by resolving names through them.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"
#include "ir/status.h"
#include "ir/var.h"
#include "ops/kernel.h"
#include "ops/tensor.h"

namespace pw::testing {

class TensorEnv {
 public:
  void Set(const std::string& name, Tensor t) { tensors_[Resolve(name)] = std::move(t); }
  // The tensor of `name` (following aliases), or nullptr.
  Tensor* Find(const std::string& name);
  // From now on `name` means `target`.
  void Alias(const std::string& name, const std::string& target) { aliases_[name] = target; }
  std::string Resolve(const std::string& name) const;
  // The type of every tensor, as declared vars (is_parameter from `params`).
  Var VarOf(const std::string& name);

 private:
  std::map<std::string, Tensor> tensors_;  // node-based: pointers stay valid
  std::map<std::string, std::string> aliases_;
};

// Runs `ops` in order. An output naming the same var as an input reuses that tensor
// (in place); every other output is freshly allocated.
Status RunOps(const std::vector<Op>& ops, TensorEnv& env, Communicator* comm = nullptr);

// An op of `type` with the given input and output slots.
using SlotList = std::vector<std::pair<std::string, std::vector<std::string>>>;
Op MakeOp(std::string type, const SlotList& inputs, const SlotList& outputs);
// An adam op that updates p, its moments m1, m2 and the powers b1p, b2p in place from g
// (attributes left to the caller).
Op AdamOp();

// Deterministic random tensors.
Tensor RandomTensor(const Shape& shape, uint32_t seed, float low = -1.f, float high = 1.f);
Tensor RandomIds(const Shape& shape, int64_t vocab, uint32_t seed);
Tensor MakeTensor(const Shape& shape, const std::vector<float>& values);
// A dropout seed: i64 [1].
Tensor SeedTensor(int64_t value);
// Slices [begin, begin + n) of `axis` of a row-major f32 tensor.
Tensor Slice(const Tensor& t, int axis, int64_t begin, int64_t n);
// Same shape and the same bits in every element.
bool SameBits(const Tensor& a, const Tensor& b);

// Member `rank` of groups of `size` (0: unknown, not checked), whose collectives the test
// does by hand: the reductions leave their buffers as they are.
class GroupMember : public Communicator {
 public:
  explicit GroupMember(int rank, int size = 0) : rank_(rank), size_(size) {}
  Status AllReduceSum(std::string_view, float*, int64_t) override { return OkStatus(); }
  Status AllReduceMax(std::string_view, float*, int64_t) override { return OkStatus(); }
  int GroupRank(std::string_view) const override { return rank_; }
  int GroupSize(std::string_view) const override { return size_; }

 private:
  int rank_, size_;
};

}  // namespace pw::testing
