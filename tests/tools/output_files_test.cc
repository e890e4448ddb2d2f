// Outputs committed together and never over an input (tools/output_files.h); a run
// directory claimed by one run at a time (executor/run_dir_claim.h).
#include "tools/output_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "executor/run_dir_claim.h"
#include "ir/file_util.h"

namespace pw::tools {
namespace {
namespace fs = std::filesystem;

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pw_output_files_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    input_ = (dir_ / "in.pbtxt").string();
    ASSERT_TRUE(WriteFileAtomically(input_, "input\n").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::string input_;
};

TEST_F(OutputFilesTest, RefusesAnInputAlsoThroughLinks) {
  fs::create_symlink(input_, Path("soft.pbtxt"));
  fs::create_hard_link(input_, Path("hard.pbtxt"));
  for (const std::string& out :
       {input_, Path("soft.pbtxt"), Path("hard.pbtxt"), Path("./in.pbtxt")}) {
    OutputFiles outputs({input_});
    Status s = outputs.Declare("-o", out);
    EXPECT_NE(s.message().find("is the input"), std::string::npos) << out << ": " << s.message();
  }
  EXPECT_EQ(*ReadFile(input_), "input\n");
}

TEST_F(OutputFilesTest, RefusesTheSameOutputTwiceAMissingFolderAndAFolder) {
  OutputFiles outputs({input_});
  ASSERT_TRUE(outputs.Declare("--trace", Path("a.json")).ok());
  EXPECT_NE(outputs.Declare("--svg", Path("a.json")).message().find("is written twice"),
            std::string::npos);
  EXPECT_NE(outputs.Declare("--svg", Path("missing/b.svg")).message().find("does not exist"),
            std::string::npos);
  EXPECT_NE(outputs.Declare("--svg", dir_.string()).message().find("is a folder"),
            std::string::npos);
}

TEST_F(OutputFilesTest, CommitsAllOrNothing) {
  ASSERT_TRUE(WriteFileAtomically(Path("a.json"), "old a").ok());
  {
    OutputFiles outputs({input_});
    ASSERT_TRUE(outputs.Declare("--trace", Path("a.json")).ok());
    ASSERT_TRUE(outputs.Declare("--svg", Path("b.svg")).ok());
    ASSERT_TRUE(outputs.Write(Path("a.json"), "new a").ok());
    // The second output fails: nothing is committed, no temporary is left behind.
    EXPECT_FALSE(
        outputs.Write(Path("b.svg"), [](const std::string&) { return Internal("disk full"); })
            .ok());
  }
  EXPECT_EQ(*ReadFile(Path("a.json")), "old a");
  EXPECT_FALSE(fs::exists(Path("b.svg")));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 2);  // in.pbtxt and a.json

  OutputFiles outputs({input_});
  ASSERT_TRUE(outputs.Declare("--trace", Path("a.json")).ok());
  ASSERT_TRUE(outputs.Declare("--svg", Path("b.svg")).ok());
  ASSERT_TRUE(outputs.Write(Path("a.json"), "new a").ok());
  ASSERT_TRUE(outputs.Write(Path("b.svg"), "new b").ok());
  ASSERT_TRUE(outputs.Commit().ok());
  EXPECT_EQ(*ReadFile(Path("a.json")), "new a");
  EXPECT_EQ(*ReadFile(Path("b.svg")), "new b");
}

TEST_F(OutputFilesTest, ARunDirectoryHasOneRunAtATime) {
  const std::string run_dir = Path("run");
  fs::create_directories(fs::path(run_dir) / "store");
  ASSERT_TRUE(WriteFileAtomically(Path("run/store/abort"), "old notice").ok());
  {
    StatusOr<RunDirClaim> first = RunDirClaim::Claim(run_dir);
    ASSERT_TRUE(first.ok()) << first.status().message();
    EXPECT_FALSE(fs::exists(Path("run/store")));  // the old run's store is gone
    StatusOr<RunDirClaim> second = RunDirClaim::Claim(run_dir);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("is in use by another run (pid " +
                                             std::to_string(getpid()) + ")"),
              std::string::npos)
        << second.status().message();
  }
  EXPECT_TRUE(RunDirClaim::Claim(run_dir).ok());  // released with the first claim
  EXPECT_FALSE(RunDirClaim::Claim(input_).ok());  // a file is not a run directory
}

}  // namespace
}  // namespace pw::tools
