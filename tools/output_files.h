#pragma once
// The outputs of one command, committed together. Each output is checked when declared,
// before any work: it must not be one of the command's inputs (the same file, also through
// links), nor another output, and its folder must exist. Each is written to a temporary
// file beside it; Commit() renames them into place only after all were written, so a
// failure leaves every output as it was.

#include <functional>
#include <string>
#include <vector>

#include "ir/status.h"

namespace pw::tools {

class OutputFiles {
 public:
  explicit OutputFiles(std::vector<std::string> inputs);
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();  // removes the temporary files of an uncommitted command

  // `flag` names the output in errors ("-o", "--trace").
  Status Declare(const std::string& flag, const std::string& path);
  // Writes a declared output's content: `write` gets the temporary path (same extension).
  Status Write(const std::string& path, const std::function<Status(const std::string&)>& write);
  Status Write(const std::string& path, const std::string& contents);
  // Renames every written output into place.
  Status Commit();

 private:
  struct Output {
    std::string path;
    std::string temp;
    bool written = false;
  };
  Output* Find(const std::string& path);

  std::vector<std::string> inputs_;
  std::vector<Output> outputs_;
};

}  // namespace pw::tools
