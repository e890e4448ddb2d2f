#pragma once
// Whole-file reads and atomic writes (temp file + rename), so that a failed command never
// leaves a corrupted or half-written output behind.

#include <string>

#include "ir/status.h"

namespace pw {

// The whole file; a folder, or more than kMaxInputFileBytes (ir/limits.h), is an error.
StatusOr<std::string> ReadFile(const std::string& path);
// Writes to "<path>.tmp.<pid>" and renames it over `path`; on error nothing at `path`
// changes and the temp file is removed.
Status WriteFileAtomically(const std::string& path, const std::string& contents);
// The lower-case extension of a path including the dot: ".pbtxt", ".pb", "".
std::string FileExtension(const std::string& path);

}  // namespace pw
