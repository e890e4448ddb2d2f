// Data-movement ops: reshape, transpose, split, concat. No arithmetic; each one's grad is
// its inverse.

#include <numeric>

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

OpCost MoveCost(const InferContext& ctx) { return OpCost{0, IoBytes(ctx)}; }

// A split{view}'s blocks are X's own bytes: nothing moves.
OpCost SplitCost(const InferContext& ctx) {
  return ctx.attrs().GetBool("view", false) ? OpCost{0, 0} : MoveCost(ctx);
}

// ---- reshape ----

Status InferReshape(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "X", ctx.Input("X").dtype));
  const Shape& x = ctx.Input("X").shape;
  Shape shape = ctx.attrs().GetInts("shape");
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer_at < 0) {
      infer_at = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return InvalidArgument(ctx.op().type, ": shape ", ShapeToString(shape),
                             " may hold one -1 and otherwise dims >= 0");
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return InvalidArgument(ctx.op().type, ": shape ", ShapeToString(shape),
                             " has more elements than an int64 counts");
    }
  }
  int64_t n = NumElements(x);
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0) {
      return Mismatch(ctx, "X", x, "shape", shape, "cannot infer the -1 dim");
    }
    shape[infer_at] = n / known;
  } else if (known != n) {
    return Mismatch(ctx, "X", x, "shape", shape, "element counts differ");
  }
  ctx.SetOutput("Out", {ctx.Input("X").dtype, shape});
  return OkStatus();
}

Status ReshapeGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  const Var* xv = ctx.FindVar(x);
  if (!xv) return NotFound("reshape grad: var '", x, "' is not declared");
  Op& op = ctx.Emit("reshape");
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("shape", xv->shape);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

// ---- transpose ----

Status InferTranspose(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "X", ctx.Input("X").dtype));
  const Shape& x = ctx.Input("X").shape;
  std::vector<int64_t> perm = ctx.attrs().GetInts("perm");
  std::vector<bool> seen(x.size(), false);
  bool ok = perm.size() == x.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<int64_t>(x.size()) && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) return Mismatch(ctx, "X", x, "perm", perm, "perm must be a permutation of X's dims");
  Shape out(x.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = x[perm[i]];
  ctx.SetOutput("Out", {ctx.Input("X").dtype, out});
  return OkStatus();
}

Status TransposeGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  std::vector<int64_t> perm = fwd.attrs.GetInts("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(perm.size())) {
      return InvalidArgument("transpose grad: bad perm ", ShapeToString(perm));
    }
    inverse[perm[i]] = static_cast<int64_t>(i);
  }
  Op& op = ctx.Emit("transpose");
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("perm", inverse);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

// ---- split / concat ----

Status InferSplit(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", ctx.Input("X").dtype, 1));
  const Shape& x = ctx.Input("X").shape;
  int axis;
  if (!NormalizeAxis(ctx.attrs().GetInt("axis"), x.size(), &axis)) {
    return InvalidArgument(Where(ctx, "X"), " ", ShapeToString(x), ": axis ",
                           ctx.attrs().GetInt("axis"), " out of range");
  }
  std::vector<int64_t> sections = ctx.attrs().GetInts("sections");
  const std::vector<std::string>* outs = ctx.op().FindOutput("Out");
  size_t n_out = outs ? outs->size() : 0;
  bool ok = n_out == sections.size() && !sections.empty();
  for (int64_t s : sections) ok = ok && s >= 0;
  if (!ok || std::accumulate(sections.begin(), sections.end(), int64_t{0}) != x[axis]) {
    return Mismatch(
        ctx, "X", x, "sections", sections,
        StrCat("sections must be >= 0, sum to dim ", axis, " and match the ", n_out, " Out vars"));
  }
  if (ctx.attrs().GetBool("view", false) &&
      std::accumulate(x.begin(), x.begin() + axis, int64_t{1}, std::multiplies<>()) != 1)
    return InvalidArgument(Where(ctx, "X"), " ", ShapeToString(x), ": split{view} needs blocks ",
                           "that are contiguous in X, so every dim before axis ", axis,
                           " must be 1 (drop view to copy)");
  for (size_t i = 0; i < sections.size(); ++i) {
    Shape s = x;
    s[axis] = sections[i];
    ctx.SetOutput("Out", {ctx.Input("X").dtype, s}, i);
  }
  return OkStatus();
}

// Gradients of `vars` for a grad op's list slot: the real grad where needed, otherwise a
// temp (an output nobody reads, or an input filled with zeros by `zero_fill`).
std::vector<std::string> GradList(GradContext& ctx, const std::vector<std::string>& vars,
                                  bool zero_fill) {
  std::vector<std::string> grads;
  for (const std::string& v : vars) {
    if (ctx.NeedsGrad(v)) {
      grads.push_back(ctx.Grad(v));
      continue;
    }
    const Var* var = ctx.FindVar(v);
    TensorType type{var ? var->dtype : DataType::kFloat32, var ? var->shape : Shape{}};
    std::string temp = ctx.NewTemp(ctx.Grad(v), type);
    if (zero_fill) {
      Op& fill = ctx.Emit("fill_constant");
      fill.SetOutput("Out", {temp});
      fill.SetAttr("shape", type.shape).SetAttr("dtype", std::string(DataTypeName(type.dtype)));
      fill.SetAttr("value", 0.0);
    }
    grads.push_back(temp);
  }
  return grads;
}

Status SplitGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  // Outputs that do not reach the loss get no gradient; concat zeros in their place.
  std::vector<std::string> douts = GradList(ctx, *fwd.FindOutput("Out"), /*zero_fill=*/true);
  Op& op = ctx.Emit("concat");
  op.SetInput("X", douts).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("axis", fwd.attrs.GetInt("axis"));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferConcat(InferContext& ctx) {
  size_t n = ctx.InputCount("X");
  if (n == 0) return InvalidArgument(ctx.op().type, ": X needs at least one var");
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", ctx.Input("X").dtype, 1));
  const TensorType& first = ctx.Input("X", 0);
  int axis;
  if (!NormalizeAxis(ctx.attrs().GetInt("axis"), first.shape.size(), &axis)) {
    return InvalidArgument(Where(ctx, "X"), " ", ShapeToString(first.shape), ": axis ",
                           ctx.attrs().GetInt("axis"), " out of range");
  }
  Shape out = first.shape;
  out[axis] = 0;
  for (size_t i = 0; i < n; ++i) {
    PW_RETURN_IF_ERROR(CheckDtype(ctx, "X", first.dtype, i));
    Shape s = ctx.Input("X", i).shape;
    Shape a = s, b = first.shape;
    if (a.size() == b.size()) a[axis] = b[axis] = 0;
    if (a != b) {
      return Mismatch(ctx, StrCat("X[", i, "]"), s, "X[0]", first.shape,
                      StrCat("dims other than axis ", axis, " differ"));
    }
    out[axis] += s[axis];
  }
  ctx.SetOutput("Out", {first.dtype, out});
  return OkStatus();
}

Status ConcatGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::vector<std::string>& xs = *fwd.FindInput("X");
  bool any = false;
  for (const std::string& x : xs) any = any || ctx.NeedsGrad(x);
  if (!any) return OkStatus();
  int64_t axis = fwd.attrs.GetInt("axis");
  std::vector<int64_t> sections;
  for (const std::string& x : xs) {
    const Var* v = ctx.FindVar(x);
    int a;
    if (!v || !NormalizeAxis(axis, v->shape.size(), &a)) {
      return InvalidArgument("concat grad: var '", x, "' is undeclared or lacks axis ", axis);
    }
    sections.push_back(v->shape[a]);
  }
  std::vector<std::string> dxs = GradList(ctx, xs, /*zero_fill=*/false);
  Op& op = ctx.Emit("split");
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", dxs);
  op.SetAttr("axis", axis).SetAttr("sections", sections);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

}  // namespace

void RegisterLayoutOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "reshape",
      .summary = "Out = X viewed as shape (one -1 is inferred)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {RequiredAttr("shape", AttrType::kInts)},
      // Moves no value: keeps its input's dtype (f32 statistics stay f32 under amp).
      .amp = AmpPolicy::kAsIs,
      .infer = InferReshape,
      .cost = MoveCost,
      .grad = ReshapeGrad,
  });
  registry.Register(OpDef{
      .type = "transpose",
      .summary = "Out.shape[i] = X.shape[perm[i]]",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {RequiredAttr("perm", AttrType::kInts)},
      .infer = InferTranspose,
      .cost = MoveCost,
      .grad = TransposeGrad,
  });
  registry.Register(OpDef{
      .type = "split",
      .summary = "Out[i] = the i-th slice of X along axis, sized sections[i]; view: the "
                 "slices are X's own bytes (executor), never written",
      .inputs = {{"X"}},
      .outputs = {{"Out", /*duplicable=*/true}},
      .attrs = {DefaultAttr("axis", int64_t{0}), RequiredAttr("sections", AttrType::kInts),
                DefaultAttr("view", false)},
      .infer = InferSplit,
      .cost = SplitCost,
      .grad = SplitGrad,
  });
  registry.Register(OpDef{
      .type = "concat",
      .summary = "Out = X[0], X[1], ... joined along axis",
      .inputs = {{"X", /*duplicable=*/true}},
      .outputs = {{"Out"}},
      .attrs = {DefaultAttr("axis", int64_t{0})},
      .infer = InferConcat,
      .cost = MoveCost,
      .grad = ConcatGrad,
  });
}

}  // namespace pw::ops
