#include "executor/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "executor/crc32c.h"
#include "ir/tensor_size.h"

namespace pw {
namespace {

constexpr char kMagic[8] = {'P', 'W', 'T', 'E', 'N', 'S', '1', '\n'};

// Buffers small writes, passes tensor data straight to the file and checksums both.
class DigestWriter {
 public:
  explicit DigestWriter(int fd) : fd_(fd) {}
  template <typename T>
  void Put(T value) {
    Write(&value, sizeof(T));
  }
  void Write(const void* data, size_t size) {
    digest_.crc32c = Crc32c(digest_.crc32c, data, size);
    digest_.bytes += static_cast<int64_t>(size);
    if (size >= kBuffer) {
      Flush();
      WriteAll(data, size);
      return;
    }
    if (buffer_.size() + size > kBuffer) Flush();
    const auto* p = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), p, p + size);
  }
  // False when a write failed; errno says why.
  bool Finish() {
    Flush();
    return ok_;
  }
  const FileDigest& digest() const { return digest_; }

 private:
  static constexpr size_t kBuffer = 1 << 16;
  void Flush() {
    WriteAll(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void WriteAll(const void* data, size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (ok_ && size > 0) {
      ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok_ = false;
        break;
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  }
  int fd_;
  bool ok_ = true;
  std::vector<char> buffer_;
  FileDigest digest_;
};

// Reads and checksums; every read is whole or the file is truncated.
class DigestReader {
 public:
  explicit DigestReader(int fd) : fd_(fd) {}
  template <typename T>
  bool Take(T& value) {
    return Read(&value, sizeof(T));
  }
  bool Read(void* data, size_t size) {
    auto* p = static_cast<char*>(data);
    const size_t want = size;
    while (size > 0) {
      ssize_t n = ::read(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<size_t>(n);
    }
    crc_ = Crc32c(crc_, data, want);
    return true;
  }
  uint32_t crc() const { return crc_; }

 private:
  int fd_;
  uint32_t crc_ = 0;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Status SaveTensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                   FileDigest* digest) {
  const std::string tmp = StrCat(path, ".tmp.", ::getpid());
  Fd file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (file.fd < 0) return Unavailable("cannot write ", tmp, ": ", std::strerror(errno));
  DigestWriter out(file.fd);
  out.Write(kMagic, sizeof(kMagic));
  out.Put<uint64_t>(tensors.size());
  for (const auto& [name, t] : tensors) {
    out.Put<uint64_t>(name.size());
    out.Write(name.data(), name.size());
    out.Put<int32_t>(static_cast<int32_t>(t.dtype()));
    out.Put<uint64_t>(t.shape().size());
    for (int64_t d : t.shape()) out.Put<int64_t>(d);
    out.Write(t.raw(), static_cast<size_t>(t.nbytes()));
  }
  // Synced before the rename: after a crash the name holds the old file or the new one.
  bool ok = out.Finish() && ::fsync(file.fd) == 0;
  const int err = errno;
  ok = ::close(file.fd) == 0 && ok;
  file.fd = -1;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(ok ? errno : err);
    std::remove(tmp.c_str());
    return Unavailable("cannot write ", path, ": ", why);
  }
  if (digest) *digest = out.digest();
  return OkStatus();
}

StatusOr<std::map<std::string, Tensor>> LoadTensors(const std::string& path,
                                                    const FileDigest* expected) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return NotFound("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return DataLoss(path, ": not a regular file");
  if (expected && st.st_size != expected->bytes)
    return DataLoss(path, st.st_size < expected->bytes ? ": truncated (" : ": too long (",
                    st.st_size, " bytes, the manifest says ", expected->bytes, ")");
  DigestReader in(file.fd);
  char magic[sizeof(kMagic)];
  if (!in.Read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    return DataLoss(path, ": not a pipeweave tensor file");
  uint64_t count = 0;
  if (!in.Take(count)) return DataLoss(path, ": truncated");
  std::map<std::string, Tensor> out;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t len = 0, rank = 0;
    int32_t dtype = 0;
    if (!in.Take(len) || len > (1 << 20)) return DataLoss(path, ": truncated");
    std::string name(len, '\0');
    if (!in.Read(name.data(), len) || !in.Take(dtype) || !in.Take(rank) || rank > 16)
      return DataLoss(path, ": truncated");
    Shape shape(rank);
    for (int64_t& d : shape)
      if (!in.Take(d) || d < 0) return DataLoss(path, ": truncated");
    // The header is checked before the tensor is allocated from it.
    const auto type = static_cast<DataType>(dtype);
    if (dtype <= 0 || dtype > static_cast<int32_t>(DataType::kBFloat16) || !TensorFits(type, shape))
      return DataLoss(path, ": tensor '", name, "' has an unknown dtype or is too large (",
                      TensorLimitText(), ")");
    Tensor t(type, shape);
    if (!in.Read(t.raw(), static_cast<size_t>(t.nbytes()))) return DataLoss(path, ": truncated");
    out.emplace(std::move(name), std::move(t));
  }
  if (expected && in.crc() != expected->crc32c)
    return DataLoss(path, ": checksum mismatch (crc32c ", Crc32cHex(in.crc()),
                    ", the manifest says ", Crc32cHex(expected->crc32c), ")");
  return out;
}

}  // namespace pw
