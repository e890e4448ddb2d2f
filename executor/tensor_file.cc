#include "executor/tensor_file.h"

#include <cstdint>
#include <cstring>
#include <fstream>

#include "ir/tensor_size.h"

namespace pw {
namespace {

constexpr char kMagic[8] = {'P', 'W', 'T', 'E', 'N', 'S', '1', '\n'};

template <typename T>
void Put(std::ofstream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}
template <typename T>
bool Take(std::ifstream& in, T& value) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&value), sizeof(T)));
}

}  // namespace

Status SaveTensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic, sizeof(kMagic));
    Put<uint64_t>(out, tensors.size());
    for (const auto& [name, t] : tensors) {
      Put<uint64_t>(out, name.size());
      out.write(name.data(), static_cast<std::streamsize>(name.size()));
      Put<int32_t>(out, static_cast<int32_t>(t.dtype()));
      Put<uint64_t>(out, t.shape().size());
      for (int64_t d : t.shape()) Put<int64_t>(out, d);
      out.write(static_cast<const char*>(t.raw()), t.nbytes());
    }
    if (!out) return Unavailable("cannot write ", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Unavailable("cannot rename ", tmp);
  return OkStatus();
}

StatusOr<std::map<std::string, Tensor>> LoadTensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open ", path);
  char magic[sizeof(kMagic)];
  if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    return DataLoss(path, ": not a pipeweave tensor file");
  uint64_t count = 0;
  if (!Take(in, count)) return DataLoss(path, ": truncated");
  std::map<std::string, Tensor> out;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t len = 0, rank = 0;
    int32_t dtype = 0;
    if (!Take(in, len) || len > (1 << 20)) return DataLoss(path, ": truncated");
    std::string name(len, '\0');
    if (!in.read(name.data(), static_cast<std::streamsize>(len)) || !Take(in, dtype) ||
        !Take(in, rank) || rank > 16)
      return DataLoss(path, ": truncated");
    Shape shape(rank);
    for (int64_t& d : shape)
      if (!Take(in, d) || d < 0) return DataLoss(path, ": truncated");
    // The header is checked before the tensor is allocated from it.
    const auto type = static_cast<DataType>(dtype);
    if (dtype <= 0 || dtype > static_cast<int32_t>(DataType::kBFloat16) || !TensorFits(type, shape))
      return DataLoss(path, ": tensor '", name, "' has an unknown dtype or is too large (",
                      TensorLimitText(), ")");
    Tensor t(type, shape);
    if (!in.read(static_cast<char*>(t.raw()), t.nbytes())) return DataLoss(path, ": truncated");
    out.emplace(std::move(name), std::move(t));
  }
  return out;
}

}  // namespace pw
