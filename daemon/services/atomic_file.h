// The daemon's one way to replace a file on disk: a reader (or a restart
// after a power cut) finds the old bytes or the new ones, never a mix.
// Blocking (fsync): call it off the event loop.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hwfarm {

// Writes `bytes` to a hidden temp file beside `path` (".NAME.tmp"), syncs it,
// renames it over `path` and syncs the directory. An infrastructure Status
// naming the step and the file when one fails.
Status replaceFile(const std::string& path, std::string_view bytes);

// replaceFile without the directory's sync: the file's bytes are synced and
// it is renamed over `path`, but the rename survives a power cut only once
// the caller has synced the folder (syncFolder), for instance once after a
// batch of files in it.
Status replaceFileUnsynced(const std::string& path, std::string_view bytes);

// Syncs folder `dir` (its entries: files renamed or made in it survive a
// power cut); "cannot sync DIR: why" when it cannot be.
Status syncFolder(const std::string& dir);

} // namespace hwfarm
