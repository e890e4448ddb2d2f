#include "tools/huge_pages.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace pw::tools {

namespace {
constexpr char kTunables[] = "GLIBC_TUNABLES";
constexpr char kHugeTlb[] = "glibc.malloc.hugetlb";
}  // namespace

void RestartWithHugePages(char** argv) {
  if (const char* off = std::getenv("PW_HUGE_PAGES"); off && std::strcmp(off, "0") == 0) return;
  const char* tunables = std::getenv(kTunables);
  // Already set, by the user (whatever its value) or by an earlier restart.
  if (tunables && std::strstr(tunables, kHugeTlb)) return;
  std::string value = tunables && *tunables ? std::string(tunables) + ":" : std::string();
  value += std::string(kHugeTlb) + "=1";
  if (setenv(kTunables, value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc, say): run on as we are, without huge pages.
  unsetenv(kTunables);
  if (tunables) setenv(kTunables, tunables, 1);
}

}  // namespace pw::tools
