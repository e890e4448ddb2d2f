// Pipeline text: what parses, what each error says.

#include "passes/pipeline_parser.h"

#include <gtest/gtest.h>

#include "tests/passes/test_passes.h"

namespace pw::testing {
namespace {

StatusOr<PassList> Parse(std::string_view text) {
  return ParsePassPipeline(text, TestPassRegistry());
}

std::string ErrorOf(std::string_view text) {
  StatusOr<PassList> passes = Parse(text);
  if (passes.ok()) return "<parsed>";
  EXPECT_EQ(passes.status().code(), StatusCode::kInvalidArgument) << text;
  return passes.status().message();
}

TEST(PipelineParser, ParsesPassesAndOptions) {
  auto passes = Parse("test-noop, test-options{count=4, rate = 0.125,flag,mode=slow} ,test-noop");
  ASSERT_TRUE(passes.ok()) << passes.status().message();
  ASSERT_EQ(passes->size(), 3u);
  EXPECT_EQ((*passes)[0]->name(), "test-noop");
  auto* options = dynamic_cast<OptionsPass*>((*passes)[1].get());
  ASSERT_NE(options, nullptr);
  EXPECT_EQ(options->count.value(), 4);
  EXPECT_DOUBLE_EQ(options->rate.value(), 0.125);
  EXPECT_TRUE(options->flag.value());
  EXPECT_EQ(options->mode.value(), "slow");
  EXPECT_EQ((*passes)[2]->name(), "test-noop");
  // Each occurrence is its own instance.
  EXPECT_NE((*passes)[0].get(), (*passes)[2].get());
}

TEST(PipelineParser, QuotedValuesAndEmptyBraces) {
  auto passes =
      Parse("test-options{path=\"a,b{c}=d\"},test-options{path='say \"hi\"'},test-noop{}");
  ASSERT_TRUE(passes.ok()) << passes.status().message();
  EXPECT_EQ(dynamic_cast<OptionsPass&>(*(*passes)[0]).path.value(), "a,b{c}=d");
  EXPECT_EQ(dynamic_cast<OptionsPass&>(*(*passes)[1]).path.value(), "say \"hi\"");
}

TEST(PipelineParser, PrintsWhatItReadsBack) {
  const char* text = "test-options{count=0,rate=0.1,flag=true,path=\"x,y\"},test-noop";
  auto passes = Parse(text);
  ASSERT_TRUE(passes.ok()) << passes.status().message();
  std::string printed = PrintPassPipeline(*passes);
  EXPECT_EQ(printed, text);
  auto again = Parse(printed);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(PrintPassPipeline(*again), printed);
}

TEST(PipelineParser, EmptyPipeline) {
  EXPECT_EQ(ErrorOf(""), "pass pipeline, column 1: the pipeline is empty");
  EXPECT_EQ(ErrorOf("  "), "pass pipeline, column 3: the pipeline is empty");
}

TEST(PipelineParser, EmptyElement) {
  EXPECT_EQ(ErrorOf("test-noop,,test-noop"),
            "pass pipeline, column 11: empty element (expected a pass name)");
  EXPECT_EQ(ErrorOf(",test-noop"), "pass pipeline, column 1: empty element (expected a pass name)");
  EXPECT_EQ(ErrorOf("test-noop,"),
            "pass pipeline, column 11: empty element (expected a pass name)");
}

TEST(PipelineParser, UnknownPassListsSimilarNames) {
  EXPECT_EQ(ErrorOf("test-noop,test-nop"),
            "pass pipeline, column 11: unknown pass 'test-nop' (did you mean 'test-noop'?)");
  EXPECT_EQ(ErrorOf("options"),
            "pass pipeline, column 1: unknown pass 'options' (did you mean 'test-options'?)");
  EXPECT_EQ(ErrorOf("zzz"),
            "pass pipeline, column 1: unknown pass 'zzz' (known passes: test-break, test-fail, "
            "test-noop, test-options, test-rename)");
}

TEST(PipelineParser, UnknownOptionListsThePassOptions) {
  EXPECT_EQ(ErrorOf("test-options{speed=1}"),
            "pass pipeline, column 14: pass 'test-options' has no option 'speed' (options: count, "
            "big, rate, flag, mode, path)");
  EXPECT_EQ(ErrorOf("test-noop{x=1}"),
            "pass pipeline, column 11: pass 'test-noop' takes no options (got 'x')");
}

TEST(PipelineParser, BadValue) {
  EXPECT_EQ(ErrorOf("test-options{rate=fast}"),
            "pass pipeline, column 19: option 'rate' of pass 'test-options': expected a finite "
            "number, got 'fast'");
  EXPECT_EQ(ErrorOf("test-options{mode=medium}"),
            "pass pipeline, column 19: option 'mode' of pass 'test-options': expected one of "
            "fast, slow, got 'medium'");
  EXPECT_EQ(ErrorOf("test-options{count=-1}"),
            "pass pipeline, column 1: pass 'test-options': count must be >= 0");
}

TEST(PipelineParser, MissingValue) {
  EXPECT_EQ(ErrorOf("test-options{rate}"),
            "pass pipeline, column 14: option 'rate' of pass 'test-options' needs a value "
            "(rate=<float>)");
  EXPECT_EQ(ErrorOf("test-options{rate=}"),
            "pass pipeline, column 19: option 'rate' of pass 'test-options' needs a value "
            "(rate=<float>)");
}

TEST(PipelineParser, DuplicateOption) {
  EXPECT_EQ(ErrorOf("test-options{count=1,count=2}"),
            "pass pipeline, column 22: option 'count' of pass 'test-options' is given twice");
}

TEST(PipelineParser, EmptyOption) {
  EXPECT_EQ(ErrorOf("test-options{count=1,}"),
            "pass pipeline, column 22: empty option in the options of pass 'test-options'");
  EXPECT_EQ(ErrorOf("test-options{,count=1}"),
            "pass pipeline, column 14: empty option in the options of pass 'test-options'");
}

TEST(PipelineParser, MissingClosingBrace) {
  EXPECT_EQ(ErrorOf("test-noop,test-options{count=1"),
            "pass pipeline, column 23: missing closing brace '}' for the options of pass "
            "'test-options'");
  EXPECT_EQ(ErrorOf("test-options{count=1,"),
            "pass pipeline, column 13: missing closing brace '}' for the options of pass "
            "'test-options'");
  // A pass name where an option should be: the '}' before it is missing.
  EXPECT_EQ(ErrorOf("test-options{count=1,test-noop"),
            "pass pipeline, column 13: missing closing brace '}' for the options of pass "
            "'test-options'");
  EXPECT_EQ(ErrorOf("test-options{"),
            "pass pipeline, column 13: missing closing brace '}' for the options of pass "
            "'test-options'");
}

TEST(PipelineParser, UnbalancedBraces) {
  EXPECT_EQ(ErrorOf("test-noop}"), "pass pipeline, column 10: unbalanced closing brace '}'");
  EXPECT_EQ(ErrorOf("test-options{count=1}}"),
            "pass pipeline, column 22: unbalanced closing brace '}'");
  EXPECT_EQ(ErrorOf("}"), "pass pipeline, column 1: unbalanced closing brace '}'");
  EXPECT_EQ(ErrorOf("{count=1}"), "pass pipeline, column 1: missing pass name before '{'");
  EXPECT_EQ(ErrorOf("test-options{path={x}}"),
            "pass pipeline, column 19: unexpected '{' in the value of option 'path' of pass "
            "'test-options' (quote values that contain it)");
}

TEST(PipelineParser, StrayCharacters) {
  EXPECT_EQ(ErrorOf("test-noop test-noop"),
            "pass pipeline, column 11: unexpected 't' after pass 'test-noop' (separate passes "
            "with ',')");
  EXPECT_EQ(ErrorOf("test-options{count=1 rate=2}"),
            "pass pipeline, column 26: unexpected '=' in the value of option 'count' of pass "
            "'test-options' (quote values that contain it)");
  EXPECT_EQ(ErrorOf("test-options{path=\"abc}"),
            "pass pipeline, column 19: unterminated \" in the value of option 'path' of pass "
            "'test-options'");
  EXPECT_EQ(ErrorOf("@"), "pass pipeline, column 1: unexpected '@' (expected a pass name)");
}

}  // namespace
}  // namespace pw::testing
