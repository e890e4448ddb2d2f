// c_reduce_scatter_sum, c_all_gather, c_sync_shards and the coalesced all-reduce and
// reduce-scatter on every CPU transport (the in-process hub, and the TCP rings of the Gloo
// communicator), members as threads: a reduce-scatter then an all-gather gives the bits of
// c_allreduce_sum of the same tensors, each element summed in member order, for 2, 3 and 4 members,
// f32 and bf16, cut along the first or an inner axis.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "executor/comm/gloo_comm.h"
#include "executor/comm/in_process_comm.h"
#include "executor/comm/kv_store.h"
#include "fresh_dir.h"
#include "ops/low_precision.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

enum class Transport { kInProcess, kGloo };

// Runs `body(member, comm)` on each of `members` mp ranks, one thread each, over the
// transport; their statuses.
std::vector<Status> OnMembers(Transport transport, int members,
                              const std::function<Status(int, Communicator&)>& body) {
  Mesh mesh;
  mesh.mp = members;
  InProcessHub hub(mesh, std::chrono::seconds(30));
  const std::string dir = FreshDir("gather_scatter");
  std::vector<Status> results(members);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < members; ++rank)
    threads.emplace_back([&, rank] {
      auto run = [&]() -> Status {
        std::unique_ptr<KvStore> store;
        std::unique_ptr<CommFactory> factory;
        if (transport == Transport::kGloo) {
          PW_ASSIGN_OR_RETURN(store, OpenStore(dir));
          GlooOptions options;
          options.timeout = std::chrono::seconds(30);
          PW_ASSIGN_OR_RETURN(factory, MakeGlooCommFactory(*store, mesh, rank, options));
        } else {
          factory = hub.FactoryFor(rank);
        }
        PW_ASSIGN_OR_RETURN(auto comm, factory->Create(StreamType::kMpComm));
        return body(rank, *comm);
      };
      results[rank] = run();
      if (!results[rank].ok()) hub.Abort(results[rank].ToString());
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(dir);
  return results;
}

// Values spread over many binades, so that summing in another order changes bits.
Tensor Spread(const Shape& shape, int member, DataType dtype) {
  std::mt19937 gen(77 + member);
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  Tensor wide(DataType::kFloat32, shape);
  for (int64_t i = 0; i < wide.numel(); ++i)
    wide.f32()[i] = std::ldexp(mantissa(gen), exponent(gen));
  if (dtype == DataType::kFloat32) return wide;
  Tensor narrow(dtype, shape);
  ops::NarrowFromF32(dtype, wide.f32(), narrow.raw(), wide.numel());
  return narrow;
}

Op CollectiveOp(const std::string& type, const std::string& in, const std::string& out, int axis,
                int members) {
  Op op = MakeOp(type, {{"X", {in}}}, {{"Out", {out}}});
  op.SetAttr("group", std::string("mp"));
  if (type != "c_allreduce_sum") {
    op.SetAttr("axis", int64_t{axis});
    op.SetAttr("nranks", int64_t{members});
  }
  return op;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

struct Case {
  Transport transport;
  int members;
  DataType dtype;
};

class GatherScatter : public ::testing::TestWithParam<Case> {};

TEST_P(GatherScatter, ReduceScatterThenAllGatherIsTheAllReduceBitForBit) {
  const Case c = GetParam();
  const int n = c.members;
  // [3, n * 5, 7]: axis 1 is an inner axis (3 rows of n slices), axis 0 needs 3 = n rows.
  for (int axis : {0, 1}) {
    Shape shape = {axis == 0 ? int64_t{n} * 2 : 3, int64_t{n} * 5, 7};
    std::vector<Tensor> xs, scattered(n), gathered(n), reduced(n);
    for (int m = 0; m < n; ++m) xs.push_back(Spread(shape, m, c.dtype));
    auto results = OnMembers(c.transport, n, [&](int m, Communicator& comm) -> Status {
      TensorEnv env;
      env.Set("x", xs[m]);
      PW_RETURN_IF_ERROR(RunOps({CollectiveOp("c_reduce_scatter_sum", "x", "rs", axis, n),
                                 CollectiveOp("c_all_gather", "rs", "ag", axis, n),
                                 CollectiveOp("c_allreduce_sum", "x", "ar", axis, n)},
                                env, &comm));
      scattered[m] = *env.Find("rs");
      gathered[m] = *env.Find("ag");
      reduced[m] = *env.Find("ar");
      return OkStatus();
    });
    for (int m = 0; m < n; ++m) ASSERT_TRUE(results[m].ok()) << results[m].ToString();

    // The member-order sum, by hand: ((x0 + x1) + x2) ... in f32, rounded once.
    const int64_t count = xs[0].numel();
    std::vector<float> sum(count), part(count);
    ops::WidenToF32(c.dtype, xs[0].raw(), sum.data(), count);
    for (int m = 1; m < n; ++m) {
      ops::WidenToF32(c.dtype, xs[m].raw(), part.data(), count);
      for (int64_t i = 0; i < count; ++i) sum[i] = sum[i] + part[i];
    }
    Tensor want(c.dtype, shape);
    ops::NarrowFromF32(c.dtype, sum.data(), want.raw(), count);
    const int64_t outer = axis == 0 ? 1 : shape[0];
    const int64_t row = shape[axis] / n * (axis == 0 ? shape[1] * shape[2] : shape[2]);
    const int64_t elem = DataTypeSize(c.dtype);
    for (int m = 0; m < n; ++m) {
      SCOPED_TRACE(::testing::Message() << n << " members, axis " << axis << ", member " << m);
      EXPECT_TRUE(SameBytes(reduced[m], want)) << "the all-reduce does not sum in member order";
      EXPECT_TRUE(SameBytes(gathered[m], reduced[m]));
      ASSERT_EQ(scattered[m].numel() * n, count);
      for (int64_t o = 0; o < outer; ++o)
        EXPECT_EQ(std::memcmp(static_cast<const char*>(scattered[m].raw()) + o * row * elem,
                              static_cast<const char*>(want.raw()) + (o * n + m) * row * elem,
                              static_cast<size_t>(row * elem)),
                  0)
            << "row " << o << " of the scattered slice";
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.transport == Transport::kGloo ? "Gloo" : "Threads") +
         std::to_string(info.param.members) +
         (info.param.dtype == DataType::kFloat32 ? "F32" : "Bf16");
}

INSTANTIATE_TEST_SUITE_P(Transports, GatherScatter,
                         ::testing::Values(Case{Transport::kInProcess, 2, DataType::kFloat32},
                                           Case{Transport::kInProcess, 3, DataType::kFloat32},
                                           Case{Transport::kInProcess, 4, DataType::kBFloat16},
                                           Case{Transport::kGloo, 2, DataType::kFloat32},
                                           Case{Transport::kGloo, 2, DataType::kBFloat16},
                                           Case{Transport::kGloo, 3, DataType::kFloat32},
                                           Case{Transport::kGloo, 4, DataType::kFloat32},
                                           Case{Transport::kGloo, 4, DataType::kBFloat16}),
                         CaseName);

// c_allreduce_coalesced (a dp bucket): each tensor gets the bits c_allreduce_sum gives it
// alone, whether the bucket is packed (Out other tensors than X) or summed in place (X views,
// end to end, of one allocation, as the executor lays a bucket out).
TEST_P(GatherScatter, CoalescedAllReduceGivesEachTensorItsAllReduceBits) {
  const Case c = GetParam();
  const int n = c.members;
  const std::vector<Shape> shapes = {{5, 7}, {3}, {2, 3, 11}};
  std::vector<std::vector<Tensor>> xs(n);
  for (int m = 0; m < n; ++m)
    for (size_t i = 0; i < shapes.size(); ++i)
      xs[m].push_back(Spread(shapes[i], m * 10 + static_cast<int>(i), c.dtype));
  std::vector<std::vector<Tensor>> alone(n), packed(n), in_place(n);
  auto results = OnMembers(c.transport, n, [&](int m, Communicator& comm) -> Status {
    TensorEnv env;
    std::vector<std::string> names, outs;
    std::vector<Op> ops;
    int64_t bytes = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back(StrCat("x", i));
      outs.push_back(StrCat("y", i));
      env.Set(names.back(), xs[m][i].Clone());
      ops.push_back(CollectiveOp("c_allreduce_sum", names.back(), StrCat("ar", i), 0, n));
      bytes += xs[m][i].nbytes();
    }
    Op coalesced = MakeOp("c_allreduce_coalesced", {{"X", names}}, {{"Out", outs}});
    coalesced.SetAttr("group", std::string("mp"));
    ops.push_back(coalesced);
    PW_RETURN_IF_ERROR(RunOps(ops, env, &comm));
    // In place: the same tensors as views of one allocation, X = Out.
    Tensor whole = Tensor::Allocated(c.dtype, {bytes / DataTypeSize(c.dtype)}, false);
    int64_t at = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor view = whole.View(at, shapes[i]);
      std::memcpy(view.raw(), xs[m][i].raw(), static_cast<size_t>(view.nbytes()));
      env.Set(StrCat("v", i), view);
      at += view.nbytes();
    }
    std::vector<std::string> views = {"v0", "v1", "v2"};
    Op summed = MakeOp("c_allreduce_coalesced", {{"X", views}}, {{"Out", views}});
    summed.SetAttr("group", std::string("mp"));
    PW_RETURN_IF_ERROR(RunOps({summed}, env, &comm));
    for (size_t i = 0; i < shapes.size(); ++i) {
      alone[m].push_back(*env.Find(StrCat("ar", i)));
      packed[m].push_back(*env.Find(outs[i]));
      in_place[m].push_back(*env.Find(views[i]));
    }
    return OkStatus();
  });
  for (int m = 0; m < n; ++m) {
    ASSERT_TRUE(results[m].ok()) << results[m].ToString();
    for (size_t i = 0; i < shapes.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "member " << m << ", tensor " << i);
      EXPECT_TRUE(SameBytes(packed[m][i], alone[m][i]));
      EXPECT_TRUE(SameBytes(in_place[m][i], alone[m][i]));
      EXPECT_TRUE(SameBytes(alone[m][i], alone[0][i]));
      EXPECT_FALSE(SameBytes(alone[m][i], xs[m][i]));  // summed at all
    }
  }
}

// c_reduce_scatter_coalesced (a distributed optimizer's bucket): each Out gets the bits
// c_reduce_scatter_sum gives its X alone, cut along the first or an inner axis.
TEST_P(GatherScatter, CoalescedReduceScatterGivesEachTensorItsSliceBits) {
  const Case c = GetParam();
  const int n = c.members;
  for (int axis : {0, 1}) {
    const std::vector<Shape> shapes = {{int64_t{n} * 2, int64_t{n} * 3, 5},
                                       {int64_t{n}, int64_t{n} * 2, 1},
                                       {int64_t{n} * 3, int64_t{n}, 4}};
    std::vector<std::vector<Tensor>> alone(n), coalesced(n);
    auto results = OnMembers(c.transport, n, [&](int m, Communicator& comm) -> Status {
      TensorEnv env;
      std::vector<Op> ops;
      std::vector<std::string> xs, outs;
      for (size_t i = 0; i < shapes.size(); ++i) {
        xs.push_back(StrCat("x", i));
        outs.push_back(StrCat("y", i));
        env.Set(xs.back(), Spread(shapes[i], m * 10 + static_cast<int>(i), c.dtype));
        ops.push_back(CollectiveOp("c_reduce_scatter_sum", xs.back(), StrCat("rs", i), axis, n));
      }
      Op bucket = MakeOp("c_reduce_scatter_coalesced", {{"X", xs}}, {{"Out", outs}});
      bucket.SetAttr("group", std::string("mp")).SetAttr("axis", int64_t{axis});
      bucket.SetAttr("nranks", int64_t{n});
      ops.push_back(bucket);
      PW_RETURN_IF_ERROR(RunOps(ops, env, &comm));
      for (size_t i = 0; i < shapes.size(); ++i) {
        alone[m].push_back(*env.Find(StrCat("rs", i)));
        coalesced[m].push_back(*env.Find(outs[i]));
      }
      return OkStatus();
    });
    for (int m = 0; m < n; ++m) {
      ASSERT_TRUE(results[m].ok()) << results[m].ToString();
      for (size_t i = 0; i < shapes.size(); ++i)
        EXPECT_TRUE(SameBytes(coalesced[m][i], alone[m][i]))
            << "member " << m << ", tensor " << i << ", axis " << axis;
    }
  }
}

// c_sync_shards: each member holds the whole tensor but only its own slice is current (the
// rest stale, different on every member); afterwards every member holds the slices of
// their owners, the bits c_all_gather of the slices gives, cut along the first or an
// inner axis.
TEST_P(GatherScatter, SyncShardsGivesEveryMemberEachOwnersSlice) {
  const Case c = GetParam();
  const int n = c.members;
  for (int axis : {0, 1}) {
    const Shape shape = {axis == 0 ? int64_t{n} * 2 : 3, int64_t{n} * 5, 7};
    std::vector<Tensor> synced(n), gathered(n);
    auto results = OnMembers(c.transport, n, [&](int m, Communicator& comm) -> Status {
      TensorEnv env;
      env.Set("t", Spread(shape, 100 + m, c.dtype));  // stale everywhere but slice m
      PW_RETURN_IF_ERROR(RunOps({CollectiveOp("c_split", "t", "mine", axis, n),
                                 CollectiveOp("c_all_gather", "mine", "gathered", axis, n),
                                 CollectiveOp("c_sync_shards", "t", "t", axis, n)},
                                env, &comm));
      synced[m] = *env.Find("t");
      gathered[m] = *env.Find("gathered");
      return OkStatus();
    });
    for (int m = 0; m < n; ++m) {
      ASSERT_TRUE(results[m].ok()) << results[m].ToString();
      EXPECT_TRUE(SameBytes(synced[m], gathered[m])) << "member " << m << ", axis " << axis;
      EXPECT_TRUE(SameBytes(synced[m], synced[0])) << "member " << m << ", axis " << axis;
    }
  }
}

// c_split keeps each member's slice of a tensor every member holds whole; gathered, the
// slices are that tensor.
TEST(GatherScatterSplit, EachMemberKeepsItsSlice) {
  const Shape shape = {3, 8, 5};
  const Tensor x = Spread(shape, 0, DataType::kFloat32);
  std::vector<Tensor> gathered(4);
  auto results = OnMembers(Transport::kInProcess, 4, [&](int m, Communicator& comm) -> Status {
    TensorEnv env;
    env.Set("x", x);
    PW_RETURN_IF_ERROR(RunOps(
        {CollectiveOp("c_split", "x", "s", 1, 4), CollectiveOp("c_all_gather", "s", "g", 1, 4)},
        env, &comm));
    gathered[m] = *env.Find("g");
    return OkStatus();
  });
  for (int m = 0; m < 4; ++m) {
    ASSERT_TRUE(results[m].ok()) << results[m].ToString();
    EXPECT_TRUE(SameBytes(gathered[m], x)) << "member " << m;
  }
}

// An nranks that is not the group's size is refused, naming both.
TEST(GatherScatterErrors, NranksDisagreeingWithTheGroupIsNamed) {
  auto results = OnMembers(Transport::kInProcess, 2, [&](int m, Communicator& comm) -> Status {
    TensorEnv env;
    env.Set("x", Spread({6, 2}, m, DataType::kFloat32));
    return RunOps({CollectiveOp("c_reduce_scatter_sum", "x", "rs", 0, 3)}, env, &comm);
  });
  for (const Status& s : results) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("nranks is 3 but group 'mp' has 2 members"), std::string::npos)
        << s.ToString();
  }
}

}  // namespace
}  // namespace pw::testing
