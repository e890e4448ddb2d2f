// Golden pass tests: every tests/golden/<name>.pipeline is one test case.
//
//   <name>.pipeline       the pass pipeline; '#' lines are comments, and a line
//                         `# input: <file>` names the input (default <name>.pbtxt)
//   <name>.pbtxt          the input module
//   <name>.expected.pbtxt the module after the pipeline, as `pipeweave opt` writes it
//   <name>.expected.err   or: the one-line error the pipeline must fail with
//
// The pipeline runs as `pipeweave opt` runs it (verification on). PW_UPDATE_GOLDEN=1
// rewrites the expected files from the actual results.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "ir/file_util.h"
#include "ir/proto_io.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"

namespace pw::testing {
namespace {

namespace fs = std::filesystem;

const fs::path& GoldenDir() {
  static const fs::path dir = fs::path(PW_SOURCE_DIR) / "tests" / "golden";
  return dir;
}

std::vector<std::string> GoldenCases() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(GoldenDir(), error))
    if (entry.path().extension() == ".pipeline") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct GoldenCase {
  std::string pipeline;
  fs::path input;
};

GoldenCase ReadCase(const std::string& name) {
  GoldenCase golden{"", GoldenDir() / (name + ".pbtxt")};
  StatusOr<std::string> text = ReadFile((GoldenDir() / (name + ".pipeline")).string());
  EXPECT_TRUE(text.ok()) << text.status().message();
  std::istringstream lines(text.ok() ? *text : "");
  std::string line;
  const std::string directive = "# input:";
  while (std::getline(lines, line)) {
    if (line.rfind(directive, 0) == 0) {
      std::string file = line.substr(directive.size());
      file.erase(0, file.find_first_not_of(' '));
      golden.input = GoldenDir() / file;
    } else if (line.empty() || line[0] != '#') {
      golden.pipeline += line;
    }
  }
  return golden;
}

// The output text, or the one-line error, of running the case.
StatusOr<std::string> RunCase(const GoldenCase& golden) {
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(golden.input.string()));
  PassManager manager(ops::Registry());
  PW_RETURN_IF_ERROR(manager.AddPipeline(golden.pipeline));
  PW_RETURN_IF_ERROR(manager.Run(module).status());
  return SerializeModule(module, ModuleFormat::kText);
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "first difference at line N" with a few lines of context from both sides.
std::string FirstDifference(const std::string& expected, const std::string& actual) {
  std::vector<std::string> want = SplitLines(expected);
  std::vector<std::string> got = SplitLines(actual);
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  std::ostringstream out;
  out << "first difference at line " << i + 1 << " (expected " << want.size() << " lines, got "
      << got.size() << ")\n";
  size_t from = i >= 2 ? i - 2 : 0;
  for (size_t j = from; j < i + 4; ++j) {
    if (j < want.size()) out << "  expected " << j + 1 << ": " << want[j] << "\n";
    if (j < got.size()) out << "  actual   " << j + 1 << ": " << got[j] << "\n";
  }
  out << "(PW_UPDATE_GOLDEN=1 rewrites the expected files)";
  return out.str();
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesExpected) {
  const std::string& name = GetParam();
  GoldenCase golden = ReadCase(name);
  ASSERT_FALSE(golden.pipeline.empty()) << name << ".pipeline holds no pipeline";
  fs::path expected_text = GoldenDir() / (name + ".expected.pbtxt");
  fs::path expected_error = GoldenDir() / (name + ".expected.err");
  StatusOr<std::string> actual = RunCase(golden);

  if (const char* update = std::getenv("PW_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    const fs::path& target = actual.ok() ? expected_text : expected_error;
    std::string contents = actual.ok() ? *actual : actual.status().message() + "\n";
    ASSERT_TRUE(WriteFileAtomically(target.string(), contents).ok());
    fs::remove(actual.ok() ? expected_error : expected_text);
    GTEST_SKIP() << "rewrote " << target.filename();
  }

  if (fs::exists(expected_error)) {
    ASSERT_FALSE(actual.ok()) << name << " should fail but succeeded";
    StatusOr<std::string> want = ReadFile(expected_error.string());
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(actual.status().message(), Trimmed(*want));
    EXPECT_EQ(actual.status().message().find('\n'), std::string::npos) << "not one line";
    return;
  }
  ASSERT_TRUE(fs::exists(expected_text))
      << "missing " << expected_text.filename() << " or " << expected_error.filename();
  ASSERT_TRUE(actual.ok()) << name << " failed: " << actual.status().message();
  StatusOr<std::string> want = ReadFile(expected_text.string());
  ASSERT_TRUE(want.ok());
  if (*want != *actual) ADD_FAILURE() << name << ": " << FirstDifference(*want, *actual);

  // Golden outputs are fixed points of a round trip through the text format.
  auto reparsed = ParseModule(*actual, ModuleFormat::kText);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  auto again = SerializeModule(*reparsed, ModuleFormat::kText);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *actual);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, ::testing::ValuesIn(GoldenCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(GoldenDirectory, HasCases) { EXPECT_GE(GoldenCases().size(), 5u); }

}  // namespace
}  // namespace pw::testing
