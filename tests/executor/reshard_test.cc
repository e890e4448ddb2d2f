// Joining shards and cutting them for another layout moves bytes exactly, along any axis
// and for 16-bit dtypes too.
#include "executor/reshard.h"

#include <gtest/gtest.h>

#include <cstring>

namespace pw {
namespace {

Tensor Iota(DataType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  auto* p = static_cast<uint16_t*>(t.raw());  // 16-bit patterns; f32 as pairs
  for (int64_t i = 0; i < t.nbytes() / 2; ++i) p[i] = static_cast<uint16_t>(i * 7 + 1);
  return t;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(Reshard, CutThenJoinGivesTheWholeBack) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    const Tensor whole = Iota(dtype, {4, 6, 2});
    for (int axis = 0; axis < 3; ++axis) {
      const int num = static_cast<int>(whole.shape()[axis]) / 2;
      std::vector<Tensor> pieces;
      for (int i = 0; i < num; ++i) pieces.push_back(CutShard(whole, axis, num, i).value());
      std::vector<const Tensor*> parts;
      for (const Tensor& p : pieces) parts.push_back(&p);
      auto joined = JoinShards(parts, axis);
      ASSERT_TRUE(joined.ok()) << joined.status().ToString();
      EXPECT_TRUE(SameBytes(*joined, whole)) << "axis " << axis;
    }
  }
}

// Two column pieces re-cut into three: each equals the cut of the whole.
TEST(Reshard, RecutsForAnotherNumberOfPieces) {
  const Tensor whole = Iota(DataType::kFloat32, {2, 6});
  const Tensor a = CutShard(whole, 1, 2, 0).value(), b = CutShard(whole, 1, 2, 1).value();
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.f32()[3], whole.f32()[6]);  // row 1 starts at column 0 of the whole's row 1
  const Tensor joined = JoinShards({&a, &b}, 1).value();
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(SameBytes(CutShard(joined, 1, 3, i).value(), CutShard(whole, 1, 3, i).value()));
}

TEST(Reshard, RefusesUnequalPiecesAndCuts) {
  const Tensor a = Iota(DataType::kFloat32, {2, 3}), b = Iota(DataType::kFloat32, {2, 4});
  EXPECT_FALSE(JoinShards({&a, &b}, 1).ok());
  auto cut = CutShard(a, 1, 2, 0);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("cannot cut [2, 3] into 2 equal pieces along axis 1"),
            std::string::npos);
}

}  // namespace
}  // namespace pw
