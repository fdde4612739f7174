// A run's artifacts as a POSIX tar archive (GET /v1/runs/{id}/artifacts.tar):
// the header blocks in front of each regular file, its padding, the end.
// And the reader of a client's archive (POST /v1/leases/{id}/results):
// regular files and folders in ustar, pax or GNU form, bounded. Pure: the
// caller reads the files and sends the bytes, or hands the reader a source.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

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

// Where an archive's bytes come from (a file, memory): read() fills up to
// `n` bytes and returns how many, 0 at the end, or the error.
class TarSource {
 public:
  virtual ~TarSource() = default;
  virtual Result<size_t> read(char* into, size_t n) = 0;
};

struct TarMember {
  std::string name;  // as the archive names it (pax or GNU long name, else prefix/name), "./" and a trailing '/' cut
  uint64_t size = 0; // its bytes
  size_t index = 0;  // its place among the archive's regular files, from 0
};

struct TarLimits {
  size_t max_members = 10000;       // regular files
  size_t max_name_bytes = 4096;     // a long name (pax path, GNU 'L')
  size_t max_meta_bytes = 65536;    // a pax header's records
  uint64_t max_total_bytes = 1ULL << 40; // every member's bytes together
};

// Reads a tar archive from `source`: for each regular file, `begin` with
// its member, `data` with its bytes (in pieces, `size` in all), then
// `end`; folders are passed over; pax global headers ignored. A callback's
// failure stops the walk and is returned. Refused (Code::invalid_argument,
// "member N \"NAME\": what" or "the archive ...") without reading further:
// a bad checksum, a size that is not octal, links, devices and FIFOs, more
// than the limits, a cut archive (data or header missing; the two zero
// blocks of the end may be missing or one), bytes other than zero after
// the end. The source's errors are returned as they are.
Status readTar(TarSource& source, const TarLimits& limits, const std::function<Status(const TarMember&)>& begin,
               const std::function<Status(std::string_view)>& data, const std::function<Status()>& end);

} // namespace hwfarm::run
