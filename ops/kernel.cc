#include "ops/kernel.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/group_members.h"
#include "ops/low_precision.h"
#include "ops/registry.h"

namespace pw {

namespace {
int SlotIndex(const std::vector<Slot>& slots, std::string_view name) {
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].name == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

const Tensor* KernelContext::In(std::string_view slot, size_t j) const {
  int i = SlotIndex(op.inputs, slot);
  if (i < 0 || static_cast<size_t>(i) >= inputs.size() || j >= inputs[i].size()) return nullptr;
  return inputs[i][j];
}

Tensor* KernelContext::Out(std::string_view slot, size_t j) const {
  int i = SlotIndex(op.outputs, slot);
  if (i < 0 || static_cast<size_t>(i) >= outputs.size() || j >= outputs[i].size()) return nullptr;
  return outputs[i][j];
}

size_t KernelContext::InCount(std::string_view slot) const {
  int i = SlotIndex(op.inputs, slot);
  return i < 0 || static_cast<size_t>(i) >= inputs.size() ? 0 : inputs[i].size();
}

Status Communicator::AllReduceSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                              int64_t count) {
  std::vector<float> wide(count);
  ops::WidenToF32(dtype, data, wide.data(), count);
  PW_RETURN_IF_ERROR(AllReduceSum(group, wide.data(), count));
  ops::NarrowFromF32(dtype, wide.data(), data, count);
  return OkStatus();
}

Status Communicator::ReduceScatterSum(std::string_view group, float* data, int64_t count) {
  return AllReduceSum(group, data, count);
}

Status Communicator::ReduceScatterSumLowPrecision(std::string_view group, DataType dtype,
                                                  void* data, int64_t count) {
  std::vector<float> wide(count);
  ops::WidenToF32(dtype, data, wide.data(), count);
  PW_RETURN_IF_ERROR(ReduceScatterSum(group, wide.data(), count));
  ops::NarrowFromF32(dtype, wide.data(), data, count);
  return OkStatus();
}

Status Communicator::AllGather(std::string_view group, void*, int64_t) {
  return Unimplemented("this transport has no all-gather (group '", group, "')");
}

Status Communicator::Shift(std::string_view group, int offset, const void* send, void* recv,
                           int64_t bytes) {
  const int members = GroupSize(group);
  if (members < 1) return Unimplemented("this transport has no shift (group '", group, "')");
  const int me = GroupRank(group);
  std::vector<char> all(static_cast<size_t>(bytes * members));
  std::memcpy(all.data() + me * bytes, send, static_cast<size_t>(bytes));
  PW_RETURN_IF_ERROR(AllGather(group, all.data(), bytes * members));
  const int from = ops::Member(me - offset, members);
  std::memcpy(recv, all.data() + from * bytes, static_cast<size_t>(bytes));
  return OkStatus();
}

int KernelContext::GroupRank() const {
  return comm ? comm->GroupRank(op.attrs.GetString("group", ops::kDefaultGroup)) : 0;
}

bool CpuKernelWritesEveryOutput(std::string_view type) {
  // Read through, kernel by kernel: GEMMs with beta 0 over the whole output (or a fill when
  // K or the batch is empty), element-wise maps over every element, attention's per-head
  // GEMMs and score rows that tile Out, Probs and dQKV (grouped-query attention's dK and dV
  // written by a group's first head, beta 0, before the others add to them). Zeroing the outputs of
  // these cost ~2 % of a CPU training step.
  static const std::set<std::string, std::less<>> kFilling = {"matmul",
                                                              "matmul_weight_grad",
                                                              "add",
                                                              "bias_add",
                                                              "gelu",
                                                              "gelu_grad",
                                                              "scale",
                                                              "dropout",
                                                              "dropout_grad",
                                                              "bias_gelu",
                                                              "bias_gelu_grad",
                                                              "bias_dropout_add",
                                                              "bias_dropout_add_grad",
                                                              "attention",
                                                              "attention_grad",
                                                              "layer_norm_grad",
                                                              "rms_norm",
                                                              "rms_norm_grad",
                                                              "swiglu",
                                                              "swiglu_grad",
                                                              "rotary_embedding",
                                                              "gqa_attention",
                                                              "gqa_attention_grad"};
  return kFilling.count(type) > 0;
}

CpuKernel FindCpuKernel(std::string_view type) {
  static const ops::cpu::KernelTable* table = [] {
    auto* t = new ops::cpu::KernelTable;
    ops::cpu::RegisterMatmulKernels(*t);
    ops::cpu::RegisterEmbeddingKernels(*t);
    ops::cpu::RegisterElementwiseKernels(*t);
    ops::cpu::RegisterNormKernels(*t);
    ops::cpu::RegisterRmsNormKernels(*t);
    ops::cpu::RegisterSwigluKernels(*t);
    ops::cpu::RegisterRotaryKernels(*t);
    ops::cpu::RegisterAttentionKernels(*t);
    ops::cpu::RegisterGqaAttentionKernels(*t);
    ops::cpu::RegisterSoftmaxKernels(*t);
    ops::cpu::RegisterMeanKernels(*t);
    ops::cpu::RegisterFillKernels(*t);
    ops::cpu::RegisterLayoutKernels(*t);
    ops::cpu::RegisterCollectiveKernels(*t);
    ops::cpu::RegisterOptimizerKernels(*t);
    ops::cpu::RegisterCastKernels(*t);
    ops::cpu::RegisterVocabParallelKernels(*t);
    ops::cpu::RegisterLossScalingKernels(*t);
    ops::cpu::RegisterDropoutKernels(*t);
    ops::cpu::RegisterBiasFusionKernels(*t);
    return t;
  }();
  auto it = table->find(type);
  return it == table->end() ? nullptr : it->second;
}

namespace ops {

void SetKernelThreads(int threads) { cpu::SetPoolThreads(std::max(1, threads)); }

Status AllReduceOverGroup(const KernelContext& ctx, Tensor& out, ReduceOp op) {
  if (op == ReduceOp::kSum) return AllReduceSumOverGroup(ctx, out.dtype(), out.raw(), out.numel());
  if (!ctx.comm) return OkStatus();
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  Status s = ctx.comm->AllReduceMax(group, out.f32(), out.numel());
  return s.ok() ? s : s.WithContext(StrCat(ctx.op.type, " over group '", group, "'"));
}

Status AllReduceSumOverGroup(const KernelContext& ctx, DataType dtype, void* data, int64_t count) {
  if (!ctx.comm) return OkStatus();
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  Status s = IsLowPrecision(dtype)
                 ? ctx.comm->AllReduceSumLowPrecision(group, dtype, data, count)
                 : ctx.comm->AllReduceSum(group, static_cast<float*>(data), count);
  return s.ok() ? s : s.WithContext(StrCat(ctx.op.type, " over group '", group, "'"));
}

StatusOr<BucketSlices> SlicesOfBucket(const KernelContext& ctx) {
  BucketSlices b;
  const size_t n = ctx.InCount("X");
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = *ctx.In("X", i);
    PW_ASSIGN_OR_RETURN(AxisSlices s, SlicesOf(ctx, x.shape()));
    b.cuts.push_back(s);
    b.offsets.push_back(b.chunk);
    b.chunk += s.outer * s.slice * DataTypeSize(x.dtype());
    b.members = s.members;
  }
  return b;
}

bool InPlaceEndToEnd(const KernelContext& ctx) {
  const size_t n = ctx.InCount("X");
  const char* end = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Tensor* x = ctx.In("X", i);
    const Tensor* out = ctx.Out("Out", i);
    if (!x || !out || x->raw() != out->raw() || (end && x->raw() != end)) return false;
    end = static_cast<const char*>(x->raw()) + x->nbytes();
  }
  return n > 0;
}

Status ReduceScatterOverGroup(const KernelContext& ctx, DataType dtype, void* data, int64_t count) {
  if (!ctx.comm) return OkStatus();
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  Status s = IsLowPrecision(dtype)
                 ? ctx.comm->ReduceScatterSumLowPrecision(group, dtype, data, count)
                 : ctx.comm->ReduceScatterSum(group, static_cast<float*>(data), count);
  return s.ok() ? s : s.WithContext(StrCat(ctx.op.type, " over group '", group, "'"));
}

Status AllGatherOverGroup(const KernelContext& ctx, void* data, int64_t bytes) {
  if (!ctx.comm) return OkStatus();
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  Status s = ctx.comm->AllGather(group, data, bytes);
  return s.ok() ? s : s.WithContext(StrCat(ctx.op.type, " over group '", group, "'"));
}

Status ShiftOverGroup(const KernelContext& ctx, int offset, const void* send, void* recv,
                      int64_t bytes) {
  if (!ctx.comm) {
    if (send != recv) std::memmove(recv, send, static_cast<size_t>(bytes));
    return OkStatus();
  }
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  Status s = ctx.comm->Shift(group, offset, send, recv, bytes);
  return s.ok() ? s : s.WithContext(StrCat(ctx.op.type, " over group '", group, "'"));
}

StatusOr<AxisSlices> SlicesOf(const KernelContext& ctx, const Shape& whole) {
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  const int64_t members = ctx.attrs().GetInt("nranks", 1);
  const int64_t rank = static_cast<int64_t>(whole.size());
  int64_t axis = ctx.attrs().GetInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || members < 1 || whole[axis] % members != 0)
    return InvalidArgument(ctx.op.type, ": cannot cut a tensor of rank ", rank, " along axis ",
                           ctx.attrs().GetInt("axis", 0), " in ", members, " slices");
  const int actual = ctx.comm ? ctx.comm->GroupSize(group) : 1;
  if (actual > 0 && actual != members)
    return InvalidArgument(ctx.op.type, ": nranks is ", members, " but group '", group, "' has ",
                           actual, " members here");
  AxisSlices s;
  s.members = static_cast<int>(members);
  for (int64_t d = 0; d < axis; ++d) s.outer *= whole[d];
  s.slice = whole[axis] / members;
  for (int64_t d = axis + 1; d < rank; ++d) s.slice *= whole[d];
  return s;
}

namespace cpu {

void CopyIfDistinct(const Tensor& src, Tensor& dst) {
  if (!src.SharesStorage(dst)) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

namespace {

// Calls f(tensor) for every input, then every output, of the context, in slot order.
template <typename F>
void ForEachTensor(const KernelContext& ctx, F f) {
  for (const auto& slot : ctx.inputs)
    for (const Tensor* t : slot) f(t);
  for (const auto& slot : ctx.outputs)
    for (const Tensor* t : slot) f(t);
}

bool TypesAsValidated(const KernelContext& ctx) {
  if (ctx.validated.empty()) return false;
  size_t k = 0;
  bool same = true;
  ForEachTensor(ctx, [&](const Tensor* t) {
    if (!same) return;
    same = t && t->defined() && k < ctx.validated.size() && t->dtype() == ctx.validated[k].dtype &&
           t->shape() == ctx.validated[k].shape;
    ++k;
  });
  return same && k == ctx.validated.size();
}

// The op's own checks on the context's tensors: slot counts, shape inference, outputs.
Status ValidateTypes(const KernelContext& ctx) {
  const Op& op = ctx.op;
  const OpDef* def = Registry().Find(op.type);
  if (!def) return NotFound("no op definition for '", op.type, "'");
  if (ctx.inputs.size() != op.inputs.size() || ctx.outputs.size() != op.outputs.size()) {
    return InvalidArgument(op.type, ": kernel context does not match the op's slots");
  }
  std::vector<std::vector<TensorType>> types(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (ctx.inputs[i].size() != op.inputs[i].vars.size()) {
      return InvalidArgument(op.type, ": input ", op.inputs[i].name, " has ", ctx.inputs[i].size(),
                             " tensors for ", op.inputs[i].vars.size(), " vars");
    }
    for (size_t j = 0; j < ctx.inputs[i].size(); ++j) {
      const Tensor* t = ctx.inputs[i][j];
      if (!t || !t->defined()) {
        return InvalidArgument(op.type, ": input ", op.inputs[i].name, " ('", op.inputs[i].vars[j],
                               "') has no tensor");
      }
      types[i].push_back(TensorType{t->dtype(), t->shape()});
    }
  }
  InferContext infer(op, std::move(types));
  if (def->infer) PW_RETURN_IF_ERROR(def->infer(infer));
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (ctx.outputs[i].size() != op.outputs[i].vars.size()) {
      return InvalidArgument(op.type, ": output ", op.outputs[i].name, " has ",
                             ctx.outputs[i].size(), " tensors for ", op.outputs[i].vars.size(),
                             " vars");
    }
    for (size_t j = 0; j < ctx.outputs[i].size(); ++j) {
      const Tensor* t = ctx.outputs[i][j];
      const TensorType& want = infer.outputs()[i][j];
      if (!t || !t->defined() || t->dtype() != want.dtype || t->shape() != want.shape) {
        return InvalidArgument(
            op.type, ": output ", op.outputs[i].name, " ('", op.outputs[i].vars[j], "') must be ",
            DataTypeName(want.dtype), " ", ShapeToString(want.shape), ", got ",
            t && t->defined() ? StrCat(DataTypeName(t->dtype()), " ", ShapeToString(t->shape()))
                              : std::string("no tensor"));
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status ValidateKernelContext(const KernelContext& ctx) {
  if (TypesAsValidated(ctx)) return OkStatus();
  PW_RETURN_IF_ERROR(ValidateTypes(ctx));
  ctx.validated.clear();
  ForEachTensor(ctx, [&](const Tensor* t) {
    ctx.validated.push_back(TensorType{t->dtype(), t->shape()});
  });
  return OkStatus();
}

bool HasLowPrecision(const KernelContext& ctx) {
  bool low = false;
  ForEachTensor(ctx, [&](const Tensor* t) { low = low || (t && IsLowPrecision(t->dtype())); });
  return low;
}

Status RunOnF32View(KernelContext& ctx, CpuKernel kernel,
                    const std::function<StatusOr<Tensor*>(const Tensor& t, bool input)>& f32_of,
                    const std::function<void(const Tensor& f32, Tensor& out)>& narrow) {
  std::map<const Tensor*, Tensor*> wide;  // an output that is also an input shares its copy
  auto view = [&](const Tensor* t, bool input) -> StatusOr<Tensor*> {
    auto it = wide.find(t);
    if (it != wide.end()) return it->second;
    PW_ASSIGN_OR_RETURN(Tensor * copy, f32_of(*t, input));
    return wide.emplace(t, copy).first->second;
  };
  KernelContext f32{ctx.op, {}, {}, ctx.comm};
  f32.inputs.resize(ctx.inputs.size());
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    for (const Tensor* t : ctx.inputs[i]) {
      if (!IsLowPrecision(t->dtype())) {
        f32.inputs[i].push_back(t);
        continue;
      }
      PW_ASSIGN_OR_RETURN(Tensor * copy, view(t, true));
      f32.inputs[i].push_back(copy);
    }
  f32.outputs.resize(ctx.outputs.size());
  for (size_t i = 0; i < ctx.outputs.size(); ++i)
    for (Tensor* t : ctx.outputs[i]) {
      if (!IsLowPrecision(t->dtype())) {
        f32.outputs[i].push_back(t);
        continue;
      }
      PW_ASSIGN_OR_RETURN(Tensor * copy, view(t, false));
      f32.outputs[i].push_back(copy);
    }
  PW_RETURN_IF_ERROR(kernel(f32));
  for (size_t i = 0; i < ctx.outputs.size(); ++i)
    for (Tensor* t : ctx.outputs[i])
      if (IsLowPrecision(t->dtype())) narrow(*wide.at(t), *t);
  return OkStatus();
}

Status RunWidened(KernelContext& ctx, CpuKernel kernel) {
  std::deque<Tensor> copies;  // pointers into it stay valid
  return RunOnF32View(
      ctx, kernel,
      [&](const Tensor& t, bool input) -> StatusOr<Tensor*> {
        return &copies.emplace_back(input ? ToF32(t) : Tensor(DataType::kFloat32, t.shape()));
      },
      [](const Tensor& f32, Tensor& out) { StoreFromF32(f32, out); });
}

}  // namespace cpu
}  // namespace ops
}  // namespace pw
