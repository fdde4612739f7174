// A run's artifacts as a POSIX tar archive (GET /v1/runs/{id}/artifacts.tar):
// the header blocks in front of each regular file, its padding, the end.
// Pure: the caller reads the files and sends the bytes.
#pragma once

#include <cstdint>
#include <string>

namespace hwfarm::run {

struct TarEntry {
  std::string name;  // the path in the archive, "/"-separated, relative
  uint64_t size = 0; // the file's bytes, which follow the header
  int64_t mtime_s = 0;
  uint32_t mode = 0644;
};

// The largest file a ustar header describes (11 octal digits).
constexpr uint64_t kTarMaxSize = 077777777777ULL;

// The 512-byte blocks in front of a regular file's bytes: one ustar header
// ("ustar\0" "00"), preceded by a pax extended header (typeflag 'x') that
// carries the path when `name` fits neither the name field (100 bytes) nor
// a prefix/name split at a '/' (155 + 100). Empty for an empty name or a
// size above kTarMaxSize. A negative mtime is written as 0.
std::string tarHeader(const TarEntry& entry);

// The zero bytes that fill `size` bytes of file data up to a 512-byte block.
size_t tarPadding(uint64_t size);

// The end of an archive: two zero blocks.
std::string tarEnd();

} // namespace hwfarm::run
