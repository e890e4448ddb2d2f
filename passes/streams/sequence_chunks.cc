#include "passes/streams/sequence_chunks.h"

#include <algorithm>
#include <functional>
#include <map>

#include "cost_model/estimator.h"
#include "cost_model/op_price.h"
#include "passes/streams/cut_pieces.h"
#include "passes/streams/interleave.h"
#include "passes/streams/row_split.h"
#include "passes/streams/row_split_choice.h"

namespace pw {
namespace {

constexpr int kMaxChunks = 8;

// `x` cut along `axis` in `pieces` equal slices (views where they can be).
Op SplitOp(const Op& like, const std::string& x, const std::vector<std::string>& slices, int axis,
           int64_t extent, bool view) {
  Op split = PieceOf(like, "split");
  split.SetInput("X", {x}).SetOutput("Out", slices);
  split.SetAttr("axis", int64_t{axis});
  split.SetAttr("sections", std::vector<int64_t>(slices.size(), extent));
  if (view) split.SetAttr("view", true);
  return split;
}

Op ConcatOp(const Op& like, const std::vector<std::string>& parts, const std::string& out,
            int axis) {
  Op concat = PieceOf(like, "concat");
  concat.SetInput("X", parts).SetOutput("Out", {out});
  concat.SetAttr("axis", int64_t{axis});
  return concat;
}

class Chunker {
 public:
  Chunker(const Module& module, Program& program, bool all, PassContext& context)
      : module_(module),
        program_(program),
        all_(all),
        context_(context),
        estimator_(context.Find<cost::Estimator>()),
        rank_(PricingRank(module, program)) {}

  SequenceChunkCounts Run(ChunkScope scope) {
    SequenceChunkCounts counts;
    auto sequence = [&](int i, const char* type) {
      const Op& op = program_.ops()[i];
      return op.type == type && op.attrs.GetString("group", "mp") == "mp";
    };
    const int n = static_cast<int>(program_.ops().size());
    if (scope == ChunkScope::kFirstGather) {
      for (int i = 0; i < n; ++i)
        if (sequence(i, "c_all_gather")) return {ChunkGather(i) ? 1 : 0, 0};
      return counts;
    }
    if (scope == ChunkScope::kLastScatter) {
      for (int i = n; i-- > 0;)
        if (sequence(i, "c_reduce_scatter_sum")) return {0, ChunkScatter(i) ? 1 : 0};
      return counts;
    }
    for (int i = 0; i < static_cast<int>(program_.ops().size()); ++i) {
      if (sequence(i, "c_all_gather")) counts.gathers += ChunkGather(i);
      if (sequence(i, "c_reduce_scatter_sum")) counts.scatters += ChunkScatter(i);
    }
    return counts;
  }

 private:
  // Seconds of `op` with some of its vars replaced by `shaped` (a chunk's shapes).
  cost::OpPrice Price(const Op& op, const std::vector<Var>& shaped = {}) const {
    auto lookup = [&](const std::string& v) -> const Var* {
      for (const Var& s : shaped)
        if (s.name == v) return &s;
      return module_.FindVar(v, &program_);
    };
    StatusOr<cost::OpPrice> p =
        cost::PriceOp(op, module_, rank_, *estimator_, context_.ops(), lookup);
    return p.ok() ? *p : cost::OpPrice{};
  }

  Var Resized(const std::string& name, int axis, int64_t divisor) const {
    Var v = *program_.FindVar(name);
    v.shape[axis] /= divisor;
    return v;
  }

  double Copy(DataType dtype, double bytes) const {
    return cost::RooflineTime(estimator_->device(), dtype, 0, 2.0 * bytes);
  }

  // The number of chunks (2..kMaxChunks) whose chain `finish(k)` is shortest, if shorter
  // than `finish(1)`, the whole collective; 1: keep it whole.
  int BestChunks(const std::function<bool(int)>& allowed,
                 const std::function<std::vector<ChainOp>(int)>& chain) const {
    if (all_) return allowed(2) ? 2 : 1;
    InterleaveOptions options;
    options.event_latency = estimator_->device().event_latency();
    auto finish = [&](int k) { return BackToBack(chain(k), {}, options).makespan; };
    int best = 1;
    double best_time = finish(1);
    for (int k = 2; k <= kMaxChunks; ++k) {
      if (!allowed(k)) continue;
      const double t = finish(k);
      if (t < best_time * 0.999) {
        best = k;
        best_time = t;
      }
    }
    return best;
  }

  bool ChunkGather(int at) {
    std::vector<Op>& ops = program_.ops();
    const Op gather = ops[at];
    if (!gather.wait_events.empty() || !gather.record_events.empty()) return false;
    const std::string x = gather.Input("X"), g = gather.Output("Out");
    const Var* xv = program_.FindVar(x);
    const Var* gv = program_.FindVar(g);
    if (!xv || !gv || x == g || IsRowBlock(x)) return false;
    const CollectiveCut cut = CutOf(gather, *gv);
    const int n = cut.members;
    if (n < 2 || cut.axis < 0 || cut.axis + 1 >= static_cast<int>(xv->shape.size())) return false;
    // Its readers: matmuls of its rows (their matrices defined before the first reader,
    // where the chunks' products go) and any others (they read it rebuilt).
    int first_reader = -1;
    std::vector<int> matmuls;
    bool others = ExportedVar(program_, g);
    for (int i = at + 1; i < static_cast<int>(ops.size()); ++i) {
      if (WritesVar(ops[i], g) || WritesVar(ops[i], x)) return false;
      if (!ReadsVar(ops[i], g)) continue;
      if (first_reader < 0) first_reader = i;
      if (MultipliesRowBlocks(program_, module_, ops[i], g, cut.axis, 1) &&
          !WrittenFrom(program_, first_reader, ops[i].Input("Y")))
        matmuls.push_back(i);
      else
        others = true;
    }
    if (matmuls.empty()) return false;
    const int64_t slice_rows = xv->shape[cut.axis];
    auto allowed = [&](int k) {
      if (slice_rows % k != 0) return false;
      for (int i : matmuls)
        if (!MultipliesRowBlocks(program_, module_, ops[i], g, cut.axis, k)) return false;
      return true;
    };
    auto chain = [&](int k) {
      std::vector<ChainOp> c;
      const std::vector<Var> chunk = {Resized(x, cut.axis, k), Resized(g, cut.axis, k)};
      const double gather_seconds = Price(gather, k > 1 ? chunk : std::vector<Var>{}).seconds;
      for (int j = 0; j < k; ++j) c.push_back(ChainOp{gather_seconds, true, -1});
      double joins = others && k > 1 ? Copy(gv->dtype, gv->num_bytes()) : 0;
      for (int j = 0; j < k; ++j)
        for (int i : matmuls) {
          const Op& mm = ops[i];
          std::vector<Var> shaped = chunk;
          if (k > 1) shaped.push_back(Resized(mm.Output("Out"), cut.axis, k));
          c.push_back(ChainOp{Price(mm, shaped).seconds, false, j});
          if (j == 0 && k > 1)
            joins += Copy(gv->dtype, program_.FindVar(mm.Output("Out"))->num_bytes());
        }
      c.push_back(ChainOp{joins, false, -1});
      return c;
    };
    const int k = BestChunks(allowed, chain);
    if (k < 2) return false;

    // X's slices, each gathered where the gather was; the products where its first reader
    // is, chunk by chunk, then each output's rows back in sequence order.
    const Op& first_mm = ops[matmuls.front()];
    const int64_t c = slice_rows / k;
    const Var xs = *xv, gs = *gv;
    std::vector<std::string> slices, gathered;
    for (int j = 0; j < k; ++j) {
      slices.push_back(DeclarePiece(program_, xs, StrCat(kRowBlockTag, j), cut.axis, c));
      gathered.push_back(DeclarePiece(program_, gs, StrCat(kRowBlockTag, j), cut.axis, c * n));
    }
    std::vector<Op> at_gather;
    Op split_x = SplitOp(first_mm, x, slices, cut.axis, c,
                         SlicesAsViews(program_, xs, cut.axis, static_cast<size_t>(at) + 1));
    at_gather.push_back(std::move(split_x));
    for (int j = 0; j < k; ++j) {
      Op part = gather;
      part.SetInput("X", {slices[j]}).SetOutput("Out", {gathered[j]});
      at_gather.push_back(std::move(part));
    }
    // A chunk's rows are [member 0's slice j, member 1's slice j, ...]; the whole's are
    // member 0's slices 0..k-1, then member 1's, ...: one concat of the pieces in that order.
    auto reorder = [&](const std::vector<std::string>& chunks, const std::string& whole,
                       std::vector<Op>& into) {
      const Var of = *program_.FindVar(chunks.front());
      std::vector<std::vector<std::string>> pieces(k);
      for (int j = 0; j < k; ++j) {
        for (int m = 0; m < n; ++m)
          pieces[j].push_back(DeclarePiece(program_, of, StrCat(".m", m), cut.axis, c));
        // A chunk is a var of the pieces: no op of the program writes it.
        into.push_back(SplitOp(first_mm, chunks[j], pieces[j], cut.axis, c,
                               SlicesAsViews(program_, of, cut.axis, ops.size())));
      }
      std::vector<std::string> order;
      for (int m = 0; m < n; ++m)
        for (int j = 0; j < k; ++j) order.push_back(pieces[j][m]);
      into.push_back(ConcatOp(first_mm, order, whole, cut.axis));
    };
    std::vector<Op> at_reader;
    std::vector<std::vector<std::string>> products(matmuls.size());
    for (int j = 0; j < k; ++j)
      for (size_t i = 0; i < matmuls.size(); ++i) {
        const Op& mm = ops[matmuls[i]];
        const Var out = *program_.FindVar(mm.Output("Out"));
        products[i].push_back(DeclarePiece(program_, out, StrCat(kRowBlockTag, j), cut.axis,
                                           out.shape[cut.axis] / k));
        Op block = mm;
        block.SetInput("X", {gathered[j]}).SetOutput("Out", {products[i].back()});
        at_reader.push_back(std::move(block));
      }
    for (size_t i = 0; i < matmuls.size(); ++i)
      reorder(products[i], ops[matmuls[i]].Output("Out"), at_reader);
    if (others) reorder(gathered, g, at_reader);

    Splice(ops, at, std::move(at_gather), first_reader, std::move(at_reader), matmuls);
    if (!others) program_.RemoveVarsIf([&](const Var& v) { return v.name == g; });
    return true;
  }

  bool ChunkScatter(int at) {
    std::vector<Op>& ops = program_.ops();
    const Op scatter = ops[at];
    if (!scatter.wait_events.empty() || !scatter.record_events.empty()) return false;
    const std::string partial = scatter.Input("X"), reduced = scatter.Output("Out");
    // The matmul that writes the partial sum, which the reduce-scatter alone reads.
    int mm_at = -1;
    for (int i = at - 1; i >= 0 && mm_at < 0; --i)
      if (WritesVar(ops[i], partial)) mm_at = i;
    if (mm_at < 0 || ExportedVar(program_, partial)) return false;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i)
      if (i != at && i != mm_at && ReadsVar(ops[i], partial)) return false;
    const Op mm = ops[mm_at];
    const std::string a = mm.Input("X");
    const Var* pv = program_.FindVar(partial);
    const Var* av = program_.FindVar(a);
    const Var* sv = program_.FindVar(reduced);
    if (!pv || !av || !sv || IsRowBlock(a)) return false;
    for (int i = mm_at + 1; i < at; ++i)
      if (WritesVar(ops[i], a) || WritesVar(ops[i], partial)) return false;
    const CollectiveCut cut = CutOf(scatter, *pv);
    const int n = cut.members;
    if (n < 2 || !MultipliesRowBlocks(program_, module_, mm, a, cut.axis, 1)) return false;
    if (pv->shape[cut.axis] != av->shape[cut.axis]) return false;
    const int64_t rows = av->shape[cut.axis];
    auto allowed = [&](int k) {
      return rows % (static_cast<int64_t>(n) * k) == 0 &&
             MultipliesRowBlocks(program_, module_, mm, a, cut.axis, k);
    };
    auto chain = [&](int k) {
      std::vector<ChainOp> c;
      if (k == 1) {
        c.push_back(ChainOp{Price(mm).seconds, false, -1});
        c.push_back(ChainOp{Price(scatter).seconds, true, -1});
        c.push_back(ChainOp{0, false, 1});
        return c;
      }
      const std::vector<Var> chunk = {Resized(a, cut.axis, k), Resized(partial, cut.axis, k),
                                      Resized(reduced, cut.axis, k)};
      const double regroup = Copy(av->dtype, av->num_bytes()) / k;
      const double block = Price(mm, chunk).seconds;
      const double part = Price(scatter, chunk).seconds;
      for (int j = 0; j < k; ++j) {
        c.push_back(ChainOp{regroup + block, false, -1});
        c.push_back(ChainOp{part, true, -1});
      }
      c.push_back(ChainOp{Copy(sv->dtype, sv->num_bytes()), false, 2 * k - 1});
      return c;
    };
    const int k = BestChunks(allowed, chain);
    if (k < 2) return false;

    // A's rows in n * k slices (member m's slice j at m * k + j); chunk j joins every
    // member's slice j, is multiplied and reduce-scattered: member m gets its slice j of
    // the sum. Its k slices joined are its rows of the whole.
    const int64_t c = rows / (static_cast<int64_t>(n) * k);
    const Var as = *av, ps = *pv, ss = *sv;
    std::vector<std::string> slices;
    for (int s = 0; s < n * k; ++s)
      slices.push_back(DeclarePiece(program_, as, StrCat(".s", s), cut.axis, c));
    std::vector<Op> at_matmul;
    at_matmul.push_back(
        SplitOp(mm, a, slices, cut.axis, c,
                SlicesAsViews(program_, as, cut.axis, static_cast<size_t>(mm_at) + 1)));
    std::vector<std::string> parts;
    for (int j = 0; j < k; ++j) {
      std::vector<std::string> members;
      for (int m = 0; m < n; ++m) members.push_back(slices[m * k + j]);
      const std::string rows_j =
          DeclarePiece(program_, as, StrCat(kRowBlockTag, j), cut.axis, c * n);
      at_matmul.push_back(ConcatOp(mm, members, rows_j, cut.axis));
      const std::string product =
          DeclarePiece(program_, ps, StrCat(kRowBlockTag, j), cut.axis, c * n);
      Op block = mm;
      block.SetInput("X", {rows_j}).SetOutput("Out", {product});
      at_matmul.push_back(std::move(block));
      parts.push_back(DeclarePiece(program_, ss, StrCat(kRowBlockTag, j), cut.axis, c));
      Op part = scatter;
      part.SetInput("X", {product}).SetOutput("Out", {parts.back()});
      at_matmul.push_back(std::move(part));
    }
    // The join where the reduce-scatter was.
    Splice(ops, mm_at, std::move(at_matmul), at, {ConcatOp(mm, parts, reduced, cut.axis)}, {at});
    program_.RemoveVarsIf([&](const Var& v) { return v.name == partial; });
    return true;
  }

  const Module& module_;
  Program& program_;
  const bool all_;
  PassContext& context_;
  const cost::Estimator* estimator_;
  const int rank_;
};

}  // namespace

SequenceChunkCounts ChunkSequenceCollectives(const Module& module, Program& program, bool all,
                                             PassContext& context, ChunkScope scope) {
  const std::string& kind = program.info().kind;
  const bool backward = kind == "backward" || kind == "backward_input";
  if (kind != "forward" && !(backward && scope == ChunkScope::kFirstGather)) return {};
  if (!all && !context.Find<cost::Estimator>()) return {};
  return Chunker(module, program, all, context).Run(scope);
}

}  // namespace pw
