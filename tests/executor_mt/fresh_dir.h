#pragma once
// A new empty folder under the system's temp folder for one test process: `name`, the
// test run's random seed and the process id, so parallel test processes never share one.
// The folders go when the process that made them exits after every test passed; a failed
// run keeps them for a look.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace pw {

namespace fresh_dir_internal {

struct MadeDirs {
  pid_t maker = getpid();
  std::vector<std::filesystem::path> dirs;
  ~MadeDirs() {
    // A forked child that exits normally runs this too: only the maker removes.
    if (getpid() != maker || !::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ec;
    for (const auto& dir : dirs) std::filesystem::remove_all(dir, ec);
  }
};

inline MadeDirs& Made() {
  static MadeDirs made;
  return made;
}

}  // namespace fresh_dir_internal

inline std::string FreshDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             (name + "." + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "." +
              std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  fresh_dir_internal::Made().dirs.push_back(dir);
  return dir.string();
}

}  // namespace pw
