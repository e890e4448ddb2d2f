#pragma once
// A new empty folder under the system's temp folder for one test process: `name`, the
// test run's random seed and the process id, so parallel test processes never share one.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace pw {

inline std::string FreshDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             (name + "." + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "." +
              std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace pw
