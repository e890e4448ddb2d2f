#pragma once
// Named tensors in one binary file: how a rank saves its parameters and optimizer state
// (`--save-params`, checkpoints) and how tests compare them across layouts.

#include <cstdint>
#include <map>
#include <string>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

// A file's size and CRC-32C (executor/crc32c.h), as a checkpoint manifest records them.
struct FileDigest {
  int64_t bytes = 0;
  uint32_t crc32c = 0;
  bool operator==(const FileDigest&) const = default;
};

// Writes to a temporary name, syncs it to disk and renames it over `path`, so that a
// reader sees the old file or the whole new one; `digest` (may be null) receives the new
// file's size and checksum.
Status SaveTensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                   FileDigest* digest = nullptr);
// With `expected`, a file of another size (truncated, grown) is refused before it is read
// and one of another checksum (corrupted) after, naming the file either way.
StatusOr<std::map<std::string, Tensor>> LoadTensors(const std::string& path,
                                                    const FileDigest* expected = nullptr);

}  // namespace pw
