#pragma once
// A one-line progress bar on stderr, drawn only when stderr is a terminal (logs and pipes
// stay clean).

#include <cstddef>
#include <string>

namespace pw::tools {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar() { Finish(); }
  // `detail` (e.g. the op being measured) is cut to fit the line.
  void Update(size_t done, size_t total, const std::string& detail);
  // Clears the line.
  void Finish();
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_ = false;
  bool drawn_ = false;
};

}  // namespace pw::tools
