// Typed pass options: defaults, parsing, allowed values, printing.

#include <gtest/gtest.h>

#include "tests/passes/test_passes.h"

namespace pw::testing {
namespace {

TEST(PassOption, DefaultsAndDeclarationOrder) {
  OptionsPass pass;
  EXPECT_EQ(pass.count.value(), 3);
  EXPECT_DOUBLE_EQ(pass.rate, 0.5);
  EXPECT_FALSE(pass.flag.value());
  EXPECT_EQ(pass.mode.value(), "fast");
  EXPECT_FALSE(pass.big.has_value());
  EXPECT_EQ(pass.big.value(), 0);
  EXPECT_FALSE(pass.count.is_set());
  std::vector<std::string> names;
  for (const PassOptionBase* o : pass.options()) names.push_back(o->name());
  EXPECT_EQ(names, (std::vector<std::string>{"count", "big", "rate", "flag", "mode", "path"}));
  EXPECT_EQ(pass.FindOption("rate"), &pass.rate);
  EXPECT_EQ(pass.FindOption("nope"), nullptr);
}

TEST(PassOption, ParsesEveryType) {
  OptionsPass pass;
  ASSERT_TRUE(pass.count.Parse("-7").ok());
  ASSERT_TRUE(pass.big.Parse("9000000000").ok());
  ASSERT_TRUE(pass.rate.Parse("1e-3").ok());
  ASSERT_TRUE(pass.flag.Parse("true").ok());
  ASSERT_TRUE(pass.mode.Parse("slow").ok());
  ASSERT_TRUE(pass.path.Parse("a b/c.csv").ok());
  EXPECT_EQ(pass.count.value(), -7);
  EXPECT_EQ(pass.big.value(), 9000000000);
  EXPECT_DOUBLE_EQ(pass.rate.value(), 1e-3);
  EXPECT_TRUE(pass.flag.value());
  EXPECT_EQ(pass.mode.value(), "slow");
  EXPECT_EQ(pass.path.value(), "a b/c.csv");
  EXPECT_TRUE(pass.count.is_set());
  ASSERT_TRUE(pass.flag.Parse("0").ok());
  EXPECT_FALSE(pass.flag.value());
}

TEST(PassOption, RejectsBadValuesWithWhatWasExpected) {
  OptionsPass pass;
  const std::string int_range = "expected an integer in [-2147483648, 2147483647], got ";
  EXPECT_EQ(pass.count.Parse("3.5").message(), int_range + "'3.5'");
  EXPECT_EQ(pass.count.Parse("").message(), int_range + "''");
  EXPECT_EQ(pass.count.Parse("9000000000").message(), int_range + "'9000000000' (out of range)");
  EXPECT_EQ(pass.big.Parse("99999999999999999999").message(),
            "expected an integer, got '99999999999999999999' (out of range)");
  EXPECT_EQ(pass.rate.Parse("fast").message(), "expected a finite number, got 'fast'");
  EXPECT_EQ(pass.rate.Parse("1.0x").message(), "expected a finite number, got '1.0x'");
  EXPECT_EQ(pass.rate.Parse("inf").message(), "expected a finite number, got 'inf'");
  EXPECT_EQ(pass.rate.Parse("nan").message(), "expected a finite number, got 'nan'");
  EXPECT_EQ(pass.rate.Parse("1e999").message(), "expected a finite number, got '1e999'");
  EXPECT_EQ(pass.flag.Parse("yes").message(), "expected true or false, got 'yes'");
  EXPECT_EQ(pass.mode.Parse("medium").message(), "expected one of fast, slow, got 'medium'");
  // A failed parse leaves the value alone.
  EXPECT_EQ(pass.count.value(), 3);
  EXPECT_FALSE(pass.count.is_set());
}

TEST(PassOption, TextForms) {
  OptionsPass pass;
  EXPECT_EQ(pass.rate.DefaultText(), "0.5");
  EXPECT_EQ(pass.big.DefaultText(), "");
  EXPECT_EQ(pass.mode.AllowedTexts(), (std::vector<std::string>{"fast", "slow"}));
  EXPECT_STREQ(pass.rate.type_name(), "float");
  EXPECT_STREQ(pass.count.type_name(), "int");
  EXPECT_STREQ(pass.flag.type_name(), "bool");
  EXPECT_STREQ(pass.path.type_name(), "string");
  pass.rate = 0.1;
  EXPECT_EQ(pass.rate.ValueText(), "0.1");  // shortest exact form
}

TEST(PassOption, PipelineTextHoldsOnlyOptionsThatWereSet) {
  OptionsPass pass;
  EXPECT_EQ(pass.PipelineText(), "test-options");
  pass.mode = "slow";
  pass.rate = 0.25;
  pass.path = "a,b";
  EXPECT_EQ(pass.PipelineText(), "test-options{rate=0.25,mode=slow,path=\"a,b\"}");
}

}  // namespace
}  // namespace pw::testing
