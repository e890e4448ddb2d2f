#include "ir/file_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ir/limits.h"

namespace pw {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgument("'", path, "' is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '", path, "': ", std::strerror(errno));
  // In pieces, so that a file with no end (a device, a pipe) stops at the limit.
  std::string text;
  char piece[1 << 16];
  while (in.read(piece, sizeof(piece)) || in.gcount() > 0) {
    text.append(piece, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxInputFileBytes)
      return InvalidArgument("'", path, "' is larger than ", kMaxInputFileBytes >> 20,
                             " MiB, the limit for an input file");
  }
  if (in.bad()) return DataLoss("cannot read '", path, "'");
  return text;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return InvalidArgument("cannot write '", path, "': ", std::strerror(errno));
  bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return InvalidArgument("cannot write '", path, "': ", std::strerror(err));
  }
  return OkStatus();
}

std::string FileExtension(const std::string& path) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace pw
