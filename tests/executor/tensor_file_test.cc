// The tensor file reader: what it wrote reads back, and a header that describes a tensor
// too large to exist is refused before anything is allocated for it.
#include "executor/tensor_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

namespace pw {
namespace {

std::string TempPath(const char* name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

TEST(TensorFile, ReadsBackWhatItWrote) {
  Tensor t(DataType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = 0.5f * i;
  const std::string path = TempPath("round_trip.pwt");
  ASSERT_TRUE(SaveTensors(path, {{"w", t}}).ok());
  auto back = LoadTensors(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->count("w"), 1u);
  EXPECT_EQ(back->at("w").shape(), (Shape{2, 3}));
  EXPECT_EQ(back->at("w").data<float>()[5], 2.5f);
}

// A header as the writer lays it out: magic, count, then name, dtype, rank and dims.
void WriteHeader(const std::string& path, int32_t dtype, const std::vector<int64_t>& dims) {
  std::ofstream out(path, std::ios::binary);
  out.write("PWTENS1\n", 8);
  auto put = [&](auto v) { out.write(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint64_t{1});
  put(uint64_t{1});
  out.write("w", 1);
  put(dtype);
  put(static_cast<uint64_t>(dims.size()));
  for (int64_t d : dims) put(d);
}

TEST(TensorFile, RefusesAHeaderTooLargeOrOfUnknownType) {
  const std::string path = TempPath("huge.pwt");
  WriteHeader(path, static_cast<int32_t>(DataType::kFloat32), {int64_t{1} << 62, 24});
  auto huge = LoadTensors(path);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos);
  WriteHeader(path, 99, {2});
  auto unknown = LoadTensors(path);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown dtype"), std::string::npos);
}

}  // namespace
}  // namespace pw
