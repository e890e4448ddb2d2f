// embedding (row gather) and embedding_grad (scatter-add into a dense W@GRAD).

#include <algorithm>

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferEmbedding(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Ids", DataType::kInt64));
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "W"));
  PW_RETURN_IF_ERROR(CheckRank(ctx, "W", dtype, 2));
  Shape out = ctx.Input("Ids").shape;
  out.push_back(ctx.Input("W").shape[1]);
  ctx.SetOutput("Out", {dtype, out});
  return OkStatus();
}

// Only the gathered rows of W are read, not the whole table.
OpCost EmbeddingCost(const InferContext& ctx) {
  double ids = NumElements(ctx.Input("Ids").shape) * 8.0;
  double out = NumElements(ctx.Output("Out").shape) * double(DataTypeSize(ctx.Input("W").dtype));
  return OpCost{0, ids + 2 * out};
}

Status EmbeddingGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& w = fwd.Input("W");
  if (!ctx.NeedsGrad(w)) return OkStatus();
  const Var* wv = ctx.FindVar(w);
  if (!wv || wv->shape.size() != 2) {
    return InvalidArgument("embedding grad: W '", w, "' is not a declared 2-D var");
  }
  Op& op = ctx.Emit("embedding_grad");
  op.SetInput("Ids", {fwd.Input("Ids")})
      .SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("W"), {ctx.Grad(w)});
  op.SetAttr("vocab_size", wv->shape[0]);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferEmbeddingGrad(InferContext& ctx) {
  const std::string dout = GradVarName("Out");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Ids", DataType::kInt64));
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, dout));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, dout, dtype, 1));
  const Shape& ids = ctx.Input("Ids").shape;
  const Shape& g = ctx.Input(dout).shape;
  if (g.size() != ids.size() + 1 || !std::equal(ids.begin(), ids.end(), g.begin())) {
    return Mismatch(ctx, "Ids", ids, dout, g, "Out@GRAD must be Ids' shape + [H]");
  }
  int64_t vocab = ctx.attrs().GetInt("vocab_size");
  if (vocab <= 0) return InvalidArgument(ctx.op().type, ": vocab_size must be > 0, got ", vocab);
  ctx.SetOutput(GradVarName("W"), {dtype, {vocab, g.back()}});
  return OkStatus();
}

}  // namespace

void RegisterEmbeddingOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "embedding",
      .summary = "Out[..., H] = W[Ids[...], :]",
      .inputs = {{"Ids"}, {"W"}},
      .outputs = {{"Out"}},
      .infer = InferEmbedding,
      .cost = EmbeddingCost,
      .grad = EmbeddingGrad,
  });
  registry.Register(OpDef{
      .type = "embedding_grad",
      .summary = "W@GRAD [vocab_size, H]: rows of Out@GRAD summed at their ids",
      .inputs = {{"Ids"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("W")}},
      .attrs = {RequiredAttr("vocab_size", AttrType::kInt)},
      .infer = InferEmbeddingGrad,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{double(NumElements(ctx.Input(GradVarName("Out")).shape)), IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
