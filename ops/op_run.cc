#include "ops/op_run.h"

#include <algorithm>
#include <cstring>

#include "ops/low_precision.h"

namespace pw::ops {

Tensor SyntheticTensor(const Var& var, std::mt19937& rng) {
  if (!IsFloatingType(var.dtype)) return Tensor(var.dtype, var.shape);
  // Random values repeated with a period of 2^20 elements: the same as all-random to a
  // kernel's speed, and quick to make for the gigabyte tensors of large layers.
  constexpr int64_t kPeriod = int64_t{1} << 20;
  Tensor out(var.dtype, var.shape);
  const int64_t n = out.numel();
  Tensor wide(DataType::kFloat32, {std::min(n, kPeriod)});
  std::uniform_real_distribution<float> dist(0.01f, 0.1f);
  for (int64_t i = 0; i < wide.numel(); ++i) wide.f32()[i] = dist(rng);
  Tensor pattern = wide;
  if (var.dtype != DataType::kFloat32) {
    pattern = Tensor(var.dtype, wide.shape());
    StoreFromF32(wide, pattern);
  }
  const size_t chunk = static_cast<size_t>(pattern.nbytes());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (size_t at = 0, total = static_cast<size_t>(out.nbytes()); at < total; at += chunk)
    std::memcpy(dst + at, pattern.raw(), std::min(chunk, total - at));
  return out;
}

StatusOr<std::unique_ptr<OpRun>> OpRun::Create(const Op& op, const std::vector<Var>& vars,
                                               const std::string& label, const Upload& upload) {
  std::map<std::string, const Var*> decls;
  for (const Var& v : vars) decls[v.name] = &v;
  std::unique_ptr<OpRun> run(new OpRun(op));
  std::mt19937 rng(7);
  for (const Slot& s : op.inputs)
    for (const std::string& v : s.vars) {
      if (run->inputs_.count(v)) continue;
      auto decl = decls.find(v);
      if (decl == decls.end()) return NotFound(label, ": input var '", v, "' is not declared");
      PW_ASSIGN_OR_RETURN(Tensor t, upload(SyntheticTensor(*decl->second, rng)));
      Tensor& input = run->inputs_[v] = std::move(t);
      if (!decl->second->persistable) run->activations_.push_back(&input);
    }
  for (const Slot& s : op.outputs)
    for (const std::string& v : s.vars) {
      auto decl = decls.find(v);
      if (decl == decls.end()) return NotFound(label, ": output var '", v, "' is not declared");
      run->output_decls_.push_back(*decl->second);
    }

  // The context is built once (the runtimes resolve theirs ahead too); in-place outputs
  // point at their input.
  KernelContext& ctx = run->ctx_;
  run->fresh_.resize(run->output_decls_.size());
  run->in_place_.assign(run->output_decls_.size(), false);
  ctx.inputs.resize(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i)
    for (const std::string& v : op.inputs[i].vars) ctx.inputs[i].push_back(&run->inputs_[v]);
  ctx.outputs.resize(op.outputs.size());
  size_t k = 0;
  for (size_t i = 0; i < op.outputs.size(); ++i)
    for (const std::string& v : op.outputs[i].vars) {
      auto in = run->inputs_.find(v);
      run->in_place_[k] = in != run->inputs_.end();
      ctx.outputs[i].push_back(run->in_place_[k] ? &in->second : &run->fresh_[k]);
      ++k;
    }
  return run;
}

void OpRun::ReleaseOutputs() {
  for (Tensor& t : fresh_) t = Tensor();
}

Status OpRun::AllocateOutputs(const Allocate& allocate) {
  ReleaseOutputs();
  for (size_t j = 0; j < fresh_.size(); ++j) {
    if (in_place_[j]) continue;
    PW_ASSIGN_OR_RETURN(fresh_[j], allocate(output_decls_[j]));
  }
  return OkStatus();
}

}  // namespace pw::ops
