// Reading a file that holds secrets (the tokens file, the upload
// credentials): only hwfarmd's user (or root) may own it, and its group and
// others may do nothing with it.
#pragma once

#include <optional>
#include <string>

namespace hwfarm::config {

// Reads `path` (at most `max_bytes`) into `text`. Refuses, with one message
// naming the fix and calling the file `what` ("tokens file"): a symbolic
// link, anything but a regular file, a file owned by anyone but the
// daemon's effective user or root, and a file its group or others may read,
// write or execute (any bit of 0077). The checks are made with fstat on the
// descriptor that is then read. Returns the refusal, or nothing.
std::optional<std::string> readPrivateFile(const std::string& path, const std::string& what, size_t max_bytes,
                                           std::string* text);

} // namespace hwfarm::config
