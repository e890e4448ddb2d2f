// The collective ring (executor/comm/tcp_ring.h), members as threads: sums and maxima of
// every size and member count, the same bits on every member, members out of step or gone
// named in an error instead of a hang.

#include "executor/comm/tcp_ring.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "fresh_dir.h"

namespace pw {
namespace {

// Runs `body(member, ring)` on `size` joined members, one thread each; their statuses.
std::vector<Status> OnRing(int size, const std::function<Status(int, TcpRing&)>& body,
                           std::chrono::milliseconds timeout = std::chrono::seconds(30),
                           bool member_order = true) {
  const std::string dir = FreshDir("tcp_ring");
  std::vector<Status> results(size);
  std::vector<std::thread> threads;
  for (int member = 0; member < size; ++member)
    threads.emplace_back([&, member] {
      auto run = [&]() -> Status {
        PW_ASSIGN_OR_RETURN(auto store, OpenStore(dir));
        TcpRingOptions options;
        options.timeout = timeout;
        options.member_order = member_order;
        PW_ASSIGN_OR_RETURN(auto ring, TcpRing::Join(*store, "test", member, size, options));
        return body(member, *ring);
      };
      results[member] = run();
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(dir);
  return results;
}

std::vector<float> Values(int member, int64_t count) {
  std::mt19937 gen(1234 + member);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(gen);
  return v;
}

class TcpRingSizes : public ::testing::TestWithParam<int> {};

TEST_P(TcpRingSizes, SumAndMaxGiveEveryMemberTheSameBits) {
  const int size = GetParam();
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{262147}}) {
    std::vector<std::vector<float>> sums(size), maxima(size);
    auto results = OnRing(size, [&](int member, TcpRing& ring) -> Status {
      sums[member] = Values(member, count);
      maxima[member] = Values(member, count);
      PW_RETURN_IF_ERROR(ring.AllReduce(sums[member].data(), count, ReduceOp::kSum));
      return ring.AllReduce(maxima[member].data(), count, ReduceOp::kMax);
    });
    for (int m = 0; m < size; ++m) ASSERT_TRUE(results[m].ok()) << results[m].ToString();
    std::vector<std::vector<float>> inputs;
    for (int m = 0; m < size; ++m) inputs.push_back(Values(m, count));
    for (int64_t i = 0; i < count; ++i) {
      double sum = 0;
      float max = -1e30f;
      for (int m = 0; m < size; ++m) {
        sum += inputs[m][i];
        max = std::max(max, inputs[m][i]);
      }
      EXPECT_NEAR(sums[0][i], sum, 1e-4 * size) << "count " << count << " element " << i;
      EXPECT_EQ(maxima[0][i], max) << "count " << count << " element " << i;
    }
    for (int m = 1; m < size; ++m) {
      EXPECT_EQ(0, std::memcmp(sums[m].data(), sums[0].data(), count * sizeof(float)))
          << "member " << m << " of " << size << ", count " << count;
      EXPECT_EQ(maxima[m], maxima[0]) << "member " << m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Members, TcpRingSizes, ::testing::Values(2, 3, 4));

// Two members add member 0's value first; the same again gives the same bits.
TEST(TcpRing, TwoMembersSumInMemberOrderAndRepeat) {
  const int64_t count = 4097;
  std::vector<std::vector<float>> first(2), second(2);
  auto results = OnRing(2, [&](int member, TcpRing& ring) -> Status {
    first[member] = Values(member, count);
    second[member] = Values(member, count);
    PW_RETURN_IF_ERROR(ring.AllReduce(first[member].data(), count, ReduceOp::kSum));
    return ring.AllReduce(second[member].data(), count, ReduceOp::kSum);
  });
  ASSERT_TRUE(results[0].ok() && results[1].ok());
  const std::vector<float> a = Values(0, count), b = Values(1, count);
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(first[0][i], a[i] + b[i]) << i;
  EXPECT_EQ(first[0], first[1]);
  EXPECT_EQ(first[0], second[0]);
}

// Any number of members sums every element in member order, ((x0 + x1) + x2) + ..., as the
// in-process transport does, whatever the buffer's length; so an all-reduce of a buffer cut
// into pieces gives the bits of the whole. The classic ring does not (its check below shows
// the test would catch it).
class TcpRingMemberOrder : public ::testing::TestWithParam<int> {};

TEST_P(TcpRingMemberOrder, SumsInMemberOrderWhateverTheCut) {
  const int size = GetParam();
  const int64_t count = 10007;
  const int64_t cut = 3001;  // two all-reduces over [0, cut) and [cut, count)
  for (bool member_order : {true, false}) {
    std::vector<std::vector<float>> whole(size), pieces(size);
    auto results = OnRing(
        size,
        [&](int member, TcpRing& ring) -> Status {
          whole[member] = Values(member, count);
          pieces[member] = Values(member, count);
          PW_RETURN_IF_ERROR(ring.AllReduce(whole[member].data(), count, ReduceOp::kSum));
          PW_RETURN_IF_ERROR(ring.AllReduce(pieces[member].data(), cut, ReduceOp::kSum));
          return ring.AllReduce(pieces[member].data() + cut, count - cut, ReduceOp::kSum);
        },
        std::chrono::seconds(30), member_order);
    for (int m = 0; m < size; ++m) ASSERT_TRUE(results[m].ok()) << results[m].ToString();
    std::vector<std::vector<float>> inputs;
    for (int m = 0; m < size; ++m) inputs.push_back(Values(m, count));
    int64_t in_member_order = 0, same_as_whole = 0;
    for (int64_t i = 0; i < count; ++i) {
      float sum = inputs[0][i];
      for (int m = 1; m < size; ++m) sum = sum + inputs[m][i];
      in_member_order += whole[0][i] == sum;
      same_as_whole += pieces[0][i] == whole[0][i];
    }
    if (member_order) {
      EXPECT_EQ(in_member_order, count) << size << " members";
      EXPECT_EQ(same_as_whole, count) << size << " members";
    } else {
      EXPECT_LT(in_member_order, count) << "the classic ring summed in member order";
      EXPECT_LT(same_as_whole, count) << "the classic ring kept its bits across the cut";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Members, TcpRingMemberOrder, ::testing::Values(3, 4, 5));

// The halves of an all-reduce: a reduce-scatter's chunk has the bits of that chunk of the
// all-reduce, and an all-gather hands every member every chunk, on the mesh and on the
// classic ring (two members: one exchange).
class TcpRingGatherScatter : public ::testing::TestWithParam<int> {};

TEST_P(TcpRingGatherScatter, HalvesOfTheAllReduce) {
  const int size = GetParam();
  const int64_t count = 1003 * size;
  for (bool member_order : {true, false}) {
    std::vector<std::vector<float>> whole(size), scattered(size);
    std::vector<std::vector<char>> gathered(size);
    const int64_t bytes = 37 * size;  // chunks of an odd byte count: no element alignment
    auto results = OnRing(
        size,
        [&](int member, TcpRing& ring) -> Status {
          whole[member] = Values(member, count);
          scattered[member] = Values(member, count);
          PW_RETURN_IF_ERROR(ring.AllReduce(whole[member].data(), count, ReduceOp::kSum));
          PW_RETURN_IF_ERROR(ring.ReduceScatterSum(scattered[member].data(), count));
          gathered[member].assign(bytes, 0);
          for (int64_t i = 0; i < bytes / size; ++i)
            gathered[member][member * (bytes / size) + i] = static_cast<char>(member * 50 + i);
          return ring.AllGather(gathered[member].data(), bytes);
        },
        std::chrono::seconds(30), member_order);
    for (int m = 0; m < size; ++m) ASSERT_TRUE(results[m].ok()) << results[m].ToString();
    const int64_t chunk = count / size;
    for (int m = 0; m < size; ++m) {
      SCOPED_TRACE(::testing::Message()
                   << size << " members, member " << m << (member_order ? "" : ", classic ring"));
      EXPECT_EQ(std::memcmp(scattered[m].data() + m * chunk, whole[0].data() + m * chunk,
                            chunk * sizeof(float)),
                0);
      for (int64_t i = 0; i < bytes; ++i)
        ASSERT_EQ(gathered[m][i], static_cast<char>((i / (bytes / size)) * 50 + i % (bytes / size)))
            << "byte " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Members, TcpRingGatherScatter, ::testing::Values(2, 3, 4));

// c_shift's transfer: every member receives the block of the member `offset` places before
// it, one message each way over the mesh (or the neighbours), at every offset; and a member
// shifting by another offset than its peers is named out of step.
class TcpRingShift : public ::testing::TestWithParam<int> {};

TEST_P(TcpRingShift, EveryMemberGetsTheBlockFromOffsetPlacesBefore) {
  const int size = GetParam();
  const int64_t bytes = 4099;
  std::vector<std::vector<std::vector<char>>> got(size, std::vector<std::vector<char>>(size));
  auto block = [&](int member, int offset) {
    std::vector<char> b(bytes);
    for (int64_t i = 0; i < bytes; ++i) b[i] = static_cast<char>(member * 31 + offset * 7 + i);
    return b;
  };
  auto results = OnRing(size, [&](int member, TcpRing& ring) -> Status {
    for (int offset = 0; offset <= size; ++offset) {
      std::vector<char> send = block(member, offset);
      got[member][offset % size].assign(bytes, 0);
      PW_RETURN_IF_ERROR(
          ring.PointShift(offset, send.data(), got[member][offset % size].data(), bytes));
    }
    return OkStatus();
  });
  for (int m = 0; m < size; ++m) ASSERT_TRUE(results[m].ok()) << results[m].ToString();
  for (int m = 0; m < size; ++m)
    for (int offset = 1; offset < size; ++offset)
      EXPECT_EQ(got[m][offset], block((m - offset + size) % size, offset))
          << size << " members, member " << m << ", offset " << offset;
}

INSTANTIATE_TEST_SUITE_P(Members, TcpRingShift, ::testing::Values(2, 3, 4));

TEST(TcpRing, ShiftByAnotherOffsetIsOutOfStep) {
  // Offsets 1 and 3 both reach the other member of two, but they are not the same shift.
  auto results = OnRing(2, [&](int member, TcpRing& ring) -> Status {
    std::vector<char> send(64, 1), recv(64);
    return ring.PointShift(member == 0 ? 1 : 3, send.data(), recv.data(), 64);
  });
  for (int m = 0; m < 2; ++m) {
    ASSERT_FALSE(results[m].ok()) << "member " << m;
    EXPECT_NE(results[m].message().find("out of step"), std::string::npos) << results[m].ToString();
  }
}

TEST(TcpRing, ReduceScatterOfAnUnevenCountIsRefused) {
  auto results = OnRing(3, [&](int, TcpRing& ring) -> Status {
    std::vector<float> data(10, 1.0f);
    return ring.ReduceScatterSum(data.data(), 10);
  });
  for (const Status& s : results) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("not a multiple"), std::string::npos) << s.ToString();
  }
}

TEST(TcpRing, EmptyTensorIsANoOp) {
  auto results = OnRing(3, [&](int, TcpRing& ring) -> Status {
    float x = 1;
    PW_RETURN_IF_ERROR(ring.AllReduce(&x, 0, ReduceOp::kSum));
    PW_RETURN_IF_ERROR(ring.AllReduce(&x, 1, ReduceOp::kSum));
    return x == 3 ? OkStatus() : Internal("sum ", x);
  });
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(TcpRing, MemberOutOfStepIsNamed) {
  auto results = OnRing(2, [&](int member, TcpRing& ring) -> Status {
    std::vector<float> data(member == 0 ? 10 : 20, 1.0f);
    return ring.AllReduce(data.data(), static_cast<int64_t>(data.size()), ReduceOp::kSum);
  });
  for (int m = 0; m < 2; ++m) {
    ASSERT_FALSE(results[m].ok()) << "member " << m;
    EXPECT_NE(results[m].message().find("out of step"), std::string::npos) << results[m].ToString();
  }
}

TEST(TcpRing, MemberGoneIsAnErrorNotAHang) {
  auto results = OnRing(2, [&](int member, TcpRing& ring) -> Status {
    if (member == 1) return OkStatus();  // leaves: its ring closes its connections
    float x = 1;
    return ring.AllReduce(&x, 1, ReduceOp::kSum);
  });
  EXPECT_TRUE(results[1].ok());
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].message().find("member 1"), std::string::npos) << results[0].ToString();
}

TEST(TcpRing, SilentMemberTimesOut) {
  auto results = OnRing(
      2,
      [&](int member, TcpRing& ring) -> Status {
        if (member == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return OkStatus();
        }
        float x = 1;
        return ring.AllReduce(&x, 1, ReduceOp::kSum);
      },
      std::chrono::milliseconds(300));
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].message().find("timed out"), std::string::npos) << results[0].ToString();
}

TEST(TcpRing, MissingMemberFailsToJoin) {
  const std::string dir = FreshDir("tcp_ring_missing");
  auto store = OpenStore(dir);
  ASSERT_TRUE(store.ok());
  TcpRingOptions options;
  options.timeout = std::chrono::milliseconds(200);
  auto ring = TcpRing::Join(**store, "alone", 0, 2, options);
  ASSERT_FALSE(ring.ok());
  EXPECT_NE(ring.status().message().find("ring 'alone' member 0"), std::string::npos)
      << ring.status().ToString();
  EXPECT_FALSE(TcpRing::Join(**store, "bad", 2, 2, options).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pw
