// The room left on the state dir's filesystem: every writer under the
// state dir (console logs, a run's artifacts, uploaded images) stops at
// limits.disk_reserve_bytes free, so that the database always has room to
// commit (docs/operations.md, "Disk space").
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace hwfarm {

// The free space of the filesystem holding `path` (a file or a directory).
Result<uint64_t> freeBytes(const std::string& path);

// Success when writing `bytes` more under `dir` leaves at least `reserve`
// bytes free; else Code::no_space (an infrastructure failure: the lab's
// disk), saying how much is free:
//   "only F bytes free on DIR, less than limits.disk_reserve_bytes (R)"
//   "N bytes would leave only F-N bytes free on DIR, less than
//    limits.disk_reserve_bytes (R)"
// A filesystem whose free space cannot be read is an io_error naming it.
Status roomFor(const std::string& dir, uint64_t bytes, uint64_t reserve);

// Success while at least half the reserve is free under `dir`: hwfarmd's
// own writers stop at the whole reserve, so only something else filling
// the disk passes it, and then new work (a lease, a run) is refused, the
// rest left to the leases that are. Else Code::no_space:
//   "only F bytes free on DIR, less than half of limits.disk_reserve_bytes (R)"
Status roomForWork(const std::string& dir, uint64_t reserve);
// The same for a free space already read (freeBytes(dir)).
Status roomForWork(const std::string& dir, const Result<uint64_t>& free, uint64_t reserve);

// The ballast: `dir`/.ballast, a file of a quarter of the reserve (4 MiB at
// most) that hwfarmd makes at start-up while the disk has room (half the
// reserve and the ballast free), and removes at start-up when less than its
// own size is free, so that it always has the room to open its database
// and start on a disk that something else filled to the last block. What was done, for the log ("" when
// nothing); a failure to make it is said, never fatal.
std::string tendBallast(const std::string& dir, uint64_t reserve);

} // namespace hwfarm
