// matmul and matmul_weight_grad. Y@GRAD of a 2-D Y gets its own op (flattening every
// leading dim of X into one GEMM) so that zero-bubble schedules can defer it.

#include "ops/defs/def_util.h"
#include "ops/defs/matmul_dims.h"
#include "ops/defs/register.h"

namespace pw::ops {

StatusOr<MatmulDims> ComputeMatmulDims(std::string_view op_type, const Shape& x, const Shape& y,
                                       bool trans_x, bool trans_y) {
  auto fail = [&](std::string_view why) -> Status {
    return InvalidArgument(op_type, ": X ", ShapeToString(x), " and Y ", ShapeToString(y), ": ",
                           why);
  };
  if (x.size() < 2) return fail("X needs rank >= 2");
  if (y.size() < 2) return fail("Y needs rank >= 2");
  MatmulDims d;
  d.x_batched = x.size() > 2;
  d.y_batched = y.size() > 2;
  Shape xlead(x.begin(), x.end() - 2), ylead(y.begin(), y.end() - 2);
  if (d.x_batched && d.y_batched && xlead != ylead) return fail("leading (batch) dims differ");
  const Shape& lead = d.x_batched ? xlead : ylead;
  d.batch = NumElements(lead);
  size_t rx = x.size(), ry = y.size();
  d.m = trans_x ? x[rx - 1] : x[rx - 2];
  d.k = trans_x ? x[rx - 2] : x[rx - 1];
  int64_t ky = trans_y ? y[ry - 1] : y[ry - 2];
  d.n = trans_y ? y[ry - 2] : y[ry - 1];
  if (d.k != ky) {
    return fail(StrCat("contracted dims differ (", d.k, " vs ", ky,
                       trans_x || trans_y ? ", after trans_x/trans_y)" : ")"));
  }
  d.out = lead;
  d.out.push_back(d.m);
  d.out.push_back(d.n);
  return d;
}

namespace {

Status InferMatmul(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Y", dtype));
  PW_ASSIGN_OR_RETURN(
      MatmulDims d,
      ComputeMatmulDims(ctx.op().type, ctx.Input("X").shape, ctx.Input("Y").shape,
                        ctx.attrs().GetBool("trans_x"), ctx.attrs().GetBool("trans_y")));
  ctx.SetOutput("Out", {dtype, d.out});
  return OkStatus();
}

OpCost MatmulCost(const InferContext& ctx) {
  OpCost cost;
  auto d = ComputeMatmulDims(ctx.op().type, ctx.Input("X").shape, ctx.Input("Y").shape,
                             ctx.attrs().GetBool("trans_x"), ctx.attrs().GetBool("trans_y"));
  if (d.ok()) cost.flops = 2.0 * d->batch * d->m * d->n * d->k;
  cost.bytes = IoBytes(ctx);
  return cost;
}

Status MatmulGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  const std::string& y = fwd.Input("Y");
  const std::string dout = ctx.Grad(fwd.Output("Out"));
  bool tx = fwd.attrs.GetBool("trans_x");
  bool ty = fwd.attrs.GetBool("trans_y");
  const Var* xv = ctx.FindVar(x);
  const Var* yv = ctx.FindVar(y);
  if (!xv || !yv) return NotFound("matmul grad: var '", xv ? y : x, "' is not declared");
  bool x_batched = xv->shape.size() > 2;
  bool y_batched = yv->shape.size() > 2;

  auto emit_matmul = [&](const std::string& a, const std::string& b, bool ta, bool tb,
                         const std::string& out) {
    Op& op = ctx.Emit("matmul");
    op.SetInput("X", {a}).SetInput("Y", {b}).SetOutput("Out", {out});
    op.SetAttr("trans_x", ta).SetAttr("trans_y", tb);
    MarkWeightGrad(ctx, op);
  };

  if (ctx.NeedsGrad(x)) {
    // A shared 2-D X under a batched Y would need a sum over the batch: not needed by any
    // model we build, so refuse rather than compute something wrong.
    if (!x_batched && y_batched) {
      return Unimplemented("matmul grad: X@GRAD of a 2-D X times a batched Y");
    }
    // dOp(X) = dOut · op(Y)^T; with trans_x, dX = op(Y) · dOut^T.
    if (!tx) {
      emit_matmul(dout, y, false, !ty, ctx.Grad(x));
    } else {
      emit_matmul(y, dout, ty, true, ctx.Grad(x));
    }
  }
  if (ctx.NeedsGrad(y)) {
    if (!y_batched) {
      Op& op = ctx.Emit("matmul_weight_grad");
      op.SetInput("X", {x}).SetInput(GradVarName("Out"), {dout});
      op.SetOutput(GradVarName("Y"), {ctx.Grad(y)});
      op.SetAttr("trans_x", tx).SetAttr("trans_y", ty);
      MarkWeightGrad(ctx, op);
    } else if (!ty) {
      // dY = op(X)^T · dOut.
      emit_matmul(x, dout, !tx, false, ctx.Grad(y));
    } else {
      // dY = dOut^T · op(X).
      emit_matmul(dout, x, true, tx, ctx.Grad(y));
    }
  }
  return OkStatus();
}

// The dtype Y@GRAD is written in: X's, or f32 when out_dtype says so (mixed precision's
// f32 gradients straight from the GEMM's f32 sums, as Megatron's main_grad takes them,
// instead of rounded to bf16 or f16 and widened by a cast).
StatusOr<DataType> WeightGradDtype(const InferContext& ctx, DataType x_dtype) {
  const std::string name = ctx.attrs().GetString(kOutDtypeAttr, "");
  if (name.empty()) return x_dtype;
  DataType dtype;
  if (!ParseDataType(name, &dtype) || dtype != DataType::kFloat32)
    return InvalidArgument(ctx.op().type, ": out_dtype '", name,
                           "' is not f32 (leave it empty for X's dtype)");
  return dtype;
}

// Y@GRAD = sum over batches of op(X)^T · dOut (transposed when trans_y).
Status InferMatmulWeightGrad(InferContext& ctx) {
  const std::string dout_slot = GradVarName("Out");
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 2));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, dout_slot, dtype, 2));
  const Shape& x = ctx.Input("X").shape;
  const Shape& g = ctx.Input(dout_slot).shape;
  bool tx = ctx.attrs().GetBool("trans_x");
  bool ty = ctx.attrs().GetBool("trans_y");
  size_t r = x.size();
  int64_t m = tx ? x[r - 1] : x[r - 2];
  int64_t k = tx ? x[r - 2] : x[r - 1];
  Shape xlead(x.begin(), x.end() - 2);
  Shape glead(g.begin(), g.end() - 2);
  if (g.size() != r || xlead != glead || g[r - 2] != m) {
    return Mismatch(ctx, "X", x, dout_slot, g, "dOut must be [..., M, N] with X's leading dims");
  }
  int64_t n = g[r - 1];
  PW_ASSIGN_OR_RETURN(DataType out, WeightGradDtype(ctx, dtype));
  const Shape dy = ty ? Shape{n, k} : Shape{k, n};
  if (ctx.HasInput("Acc")) {
    const TensorType& acc = ctx.Input("Acc");
    if (out != DataType::kFloat32 || acc.dtype != DataType::kFloat32)
      return InvalidArgument(ctx.op().type, ": Acc adds into an f32 gradient (",
                             DataTypeName(acc.dtype), " Acc, ", DataTypeName(out), " Y@GRAD)");
    if (acc.shape != dy) return Mismatch(ctx, "Acc", acc.shape, GradVarName("Y"), dy, "same shape");
  }
  ctx.SetOutput(GradVarName("Y"), {out, dy});
  return OkStatus();
}

OpCost MatmulWeightGradCost(const InferContext& ctx) {
  OpCost cost;
  const Shape& x = ctx.Input("X").shape;
  const Shape& g = ctx.Input(GradVarName("Out")).shape;
  if (x.size() >= 2 && !g.empty()) cost.flops = 2.0 * NumElements(x) * g.back();
  cost.bytes = IoBytes(ctx);
  return cost;
}

}  // namespace

void RegisterMatmulOps(OpRegistry& registry) {
  std::vector<AttrDef> trans = {DefaultAttr("trans_x", false), DefaultAttr("trans_y", false)};
  registry.Register(OpDef{
      .type = "matmul",
      .summary = "Out[..., M, N] = op(X)[..., M, K] · op(Y)[..., K, N]; a 2-D operand is "
                 "shared across the other's leading dims",
      .inputs = {{"X"}, {"Y"}},
      .outputs = {{"Out"}},
      .attrs = trans,
      .infer = InferMatmul,
      .cost = MatmulCost,
      .grad = MatmulGrad,
  });
  registry.Register(OpDef{
      .type = "matmul_weight_grad",
      .summary = "Y@GRAD of matmul with a 2-D Y: flatten(op(X))^T · flatten(Out@GRAD); "
                 "out_dtype=f32 writes the f32 sums of 16-bit operands; with Acc (f32), "
                 "Y@GRAD = Acc + that product, the bits of a separate add (the executors' "
                 "gradient accumulation fused into the GEMM)",
      .inputs = {{"X"}, {GradVarName("Out")}, {"Acc", false, /*optional=*/true}},
      .outputs = {{GradVarName("Y")}},
      .attrs = {DefaultAttr("trans_x", false), DefaultAttr("trans_y", false),
                DefaultAttr(kOutDtypeAttr, std::string())},
      .infer = InferMatmulWeightGrad,
      .cost = MatmulWeightGradCost,
  });
}

}  // namespace pw::ops
