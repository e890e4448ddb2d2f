#include "ir/attribute.h"

#include <gtest/gtest.h>

namespace pw {
namespace {

TEST(AttrListTest, SetKeepsFirstPositionAndReplaces) {
  AttrList a;
  a.Set("x", int64_t{1});
  a.Set("y", 2.5);
  a.Set("x", int64_t{3});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a.items()[0].first, "x");
  EXPECT_EQ(a.GetInt("x"), 3);
  EXPECT_DOUBLE_EQ(a.GetFloat("y"), 2.5);
}

TEST(AttrListTest, TypedGettersFallBack) {
  AttrList a;
  a.Set("s", std::string("hi"));
  a.Set("i", int64_t{4});
  EXPECT_EQ(a.GetInt("missing", 7), 7);
  EXPECT_EQ(a.GetInt("s", 9), 9);          // wrong type yields the default
  EXPECT_DOUBLE_EQ(a.GetFloat("i"), 4.0);  // ints read as floats
  EXPECT_EQ(a.GetString("s"), "hi");
  EXPECT_TRUE(a.Erase("s"));
  EXPECT_FALSE(a.Has("s"));
}

TEST(AttrListTest, ToString) {
  EXPECT_EQ(AttributeToString(Attribute(std::vector<int64_t>{1, 2})), "[1, 2]");
  EXPECT_EQ(AttributeToString(Attribute(true)), "true");
  EXPECT_EQ(AttributeToString(Attribute(std::string("a"))), "\"a\"");
}

}  // namespace
}  // namespace pw
