#include "executor/comm/file_store.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pw {
namespace {

namespace fs = std::filesystem;

// Keys may hold '/' and other characters a file name cannot; escape them.
std::string FileName(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

class FileStore final : public KvStore {
 public:
  explicit FileStore(fs::path dir) : dir_(std::move(dir)) {}

  Status Set(const std::string& key, const std::string& value) override {
    fs::path final_path = dir_ / FileName(key);
    fs::path tmp = dir_ / StrCat(".tmp.", getpid(), ".", counter_++, ".", FileName(key));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), static_cast<std::streamsize>(value.size()));
      if (!out) return Unavailable("cannot write ", tmp.string());
    }
    std::error_code ec;
    fs::rename(tmp, final_path, ec);
    if (ec) return Unavailable("cannot rename ", tmp.string(), ": ", ec.message());
    return OkStatus();
  }

  StatusOr<bool> SetIfAbsent(const std::string& key, const std::string& value) override {
    fs::path final_path = dir_ / FileName(key);
    fs::path tmp = dir_ / StrCat(".tmp.", getpid(), ".", counter_++, ".", FileName(key));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), static_cast<std::streamsize>(value.size()));
      if (!out) return Unavailable("cannot write ", tmp.string());
    }
    // link() fails when the name exists: of several writers exactly one succeeds.
    const bool set = link(tmp.c_str(), final_path.c_str()) == 0;
    const int error = errno;
    unlink(tmp.c_str());
    if (!set && error != EEXIST)
      return Unavailable("cannot link ", final_path.string(), ": ", std::strerror(error));
    return set;
  }

  StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    std::ifstream in(dir_ / FileName(key), std::ios::binary);
    if (!in) return std::optional<std::string>();
    std::ostringstream value;
    value << in.rdbuf();
    return std::optional<std::string>(value.str());
  }

  std::string Describe() const override { return "directory " + dir_.string(); }

 private:
  fs::path dir_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace

StatusOr<std::unique_ptr<KvStore>> OpenFileStore(const std::string& directory) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec || !fs::is_directory(directory))
    return Unavailable("store directory '", directory, "' cannot be created: ", ec.message());
  return std::unique_ptr<KvStore>(std::make_unique<FileStore>(directory));
}

}  // namespace pw
