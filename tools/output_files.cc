#include "tools/output_files.h"

#include <unistd.h>

#include <filesystem>

#include "ir/file_util.h"

namespace pw::tools {
namespace fs = std::filesystem;

namespace {

// Whether `a` and `b` name one file: the same inode when both exist (hard and symbolic
// links), else the same normalized path.
bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

}  // namespace

OutputFiles::OutputFiles(std::vector<std::string> inputs) : inputs_(std::move(inputs)) {}

OutputFiles::~OutputFiles() {
  std::error_code ec;
  for (const Output& o : outputs_)
    if (o.written) fs::remove(o.temp, ec);
}

Status OutputFiles::Declare(const std::string& flag, const std::string& path) {
  if (path.empty()) return InvalidArgument(flag, " needs a file name");
  for (const std::string& input : inputs_)
    if (SameFile(path, input))
      return InvalidArgument(flag, " ", path, " is the input ", input,
                             ": write the output to another file");
  for (const Output& o : outputs_)
    if (SameFile(path, o.path)) return InvalidArgument(flag, " ", path, " is written twice");
  std::error_code ec;
  fs::path folder = fs::path(path).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec))
    return InvalidArgument(flag, " ", path, ": folder ", folder.string(), " does not exist");
  if (fs::is_directory(path, ec)) return InvalidArgument(flag, " ", path, " is a folder");
  // The temporary keeps the extension: writers pick the format from it.
  fs::path p(path);
  fs::path temp =
      p.parent_path() / StrCat(".", p.stem().string(), ".tmp", getpid(), p.extension().string());
  outputs_.push_back({path, temp.string()});
  return OkStatus();
}

OutputFiles::Output* OutputFiles::Find(const std::string& path) {
  for (Output& o : outputs_)
    if (o.path == path) return &o;
  return nullptr;
}

Status OutputFiles::Write(const std::string& path,
                          const std::function<Status(const std::string&)>& write) {
  Output* o = Find(path);
  if (!o) return Internal("output ", path, " was not declared");
  o->written = true;  // from here on the destructor removes a partial temporary
  return write(o->temp);
}

Status OutputFiles::Write(const std::string& path, const std::string& contents) {
  return Write(path, [&](const std::string& temp) { return WriteFileAtomically(temp, contents); });
}

Status OutputFiles::Commit() {
  for (Output& o : outputs_) {
    if (!o.written) continue;
    std::error_code ec;
    fs::rename(o.temp, o.path, ec);
    if (ec) return Internal("cannot write ", o.path, ": ", ec.message());
    o.written = false;
  }
  return OkStatus();
}

}  // namespace pw::tools
