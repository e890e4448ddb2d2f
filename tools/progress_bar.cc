#include "tools/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace pw::tools {

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) != 0) {}

void ProgressBar::Update(size_t done, size_t total, const std::string& detail) {
  if (!enabled_ || total == 0) return;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(kWidth * done / total);
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
  std::string d = detail.size() > 50 ? detail.substr(0, 47) + "..." : detail;
  std::fprintf(stderr, "\r\033[K%s [%s] %zu/%zu %s", label_.c_str(), bar.c_str(), done, total,
               d.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace pw::tools
