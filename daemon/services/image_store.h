// Firmware images a lease flashes (issue 9 item 3). Images live in the
// lease's store, <state_dir>/consoles/<lease>/images, named by content:
// <sha256><ext>, with the extension chosen from a fixed list, so a flasher
// only ever sees a path the daemon made. The store is removed when the
// lease ends (BoardService::leaseEnded); the lease's logs beside it stay.
//
// An image arrives either uploaded in the flash request (the server spools
// it, router stores it here) or as a server-side path, allowed only under
// agent.image_roots and copied into the store before it is flashed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace hwfarm {

// The extensions a stored image may have, lower case with the dot.
const std::vector<std::string>& imageExtensions();

// The stored extension for an image named `name` (a client's file name or a
// server path): its own extension lower-cased when it is in
// imageExtensions(), ".bin" when it has none. Code::invalid_argument for
// any other extension.
Result<std::string> imageExtension(const std::string& name);

// `name` reduced for logs: its last path component, characters outside
// [A-Za-z0-9._+-] replaced by '_', at most 128 bytes.
std::string sanitizeImageName(const std::string& name);

// A server-side image path checked against the allowed roots.
struct ServerImage {
  int fd = -1;           // open, read-only, close-on-exec; the caller owns it
  std::string real_path; // after realpath
  uint64_t bytes = 0;
};

// Opens `path` if it resolves (realpath) to a file under one of `roots`
// (each resolved too), opened beneath that root by the resolved path
// through no symlink (openBeneath: one swapped in since is refused), and
// fstat says it is a regular file of at most `max_bytes`. A path outside
// the roots, existing or not, gets the same answer, so a caller learns
// nothing about the rest of the server's files. Refusals: Code::permission_denied (outside the
// roots, or no roots), invalid_argument (missing, unreadable, not a
// regular file), too_large (over `max_bytes`).
Result<ServerImage> openServerImage(const std::string& path, const std::vector<std::string>& roots, uint64_t max_bytes);

// Copies `fd` (read to its end; not closed) into `dir` as <sha256><ext>,
// hashing as it goes. An image already stored with that content is kept
// as it is. Returns the stored path, or an infrastructure failure naming
// the path that failed. Blocking: run it off the event loop.
Result<std::string> copyIntoStore(int fd, const std::string& dir, const std::string& ext);

// Moves an uploaded file (the server's spool, hashed to `sha256`) into
// `dir` as <sha256><ext>; when that image is stored already the upload is
// left for the server to remove. Returns the stored path, or an
// infrastructure failure naming it.
Result<std::string> storeUpload(const std::string& file, const std::string& sha256, const std::string& dir,
                                const std::string& ext);

} // namespace hwfarm
