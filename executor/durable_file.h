#pragma once
// Writes that survive a crash of the process or of the machine: the data is synced before
// the rename that publishes it, and the folder after, so a name holds the old contents or
// the whole new ones, also after a power loss.

#include <string>

#include "ir/status.h"

namespace pw {

Status WriteFileDurably(const std::string& path, const std::string& contents);
// Syncs a folder's entries (names created, renamed or removed in it).
Status SyncDirectory(const std::string& dir);

}  // namespace pw
