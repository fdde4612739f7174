#include "daemon/services/disk_room.h"

#include <sys/statvfs.h>

#include <cerrno>

namespace hwfarm {

Result<uint64_t> freeBytes(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return Status::fromErrno("cannot read the free space of " + path, errno);
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

Status roomFor(const std::string& dir, uint64_t bytes, uint64_t reserve) {
  Result<uint64_t> free = freeBytes(dir);
  if (!free) return Status::infrastructure(Code::io_error, free.status().message());
  if (*free >= bytes && *free - bytes >= reserve) return Status::success();
  std::string limit = ", less than limits.disk_reserve_bytes (" + std::to_string(reserve) + ")";
  if (bytes == 0 || *free < reserve)
    return Status::infrastructure(Code::no_space,
                                  "only " + std::to_string(*free) + " bytes free on " + dir + limit);
  return Status::infrastructure(Code::no_space, std::to_string(bytes) + " bytes would leave only " +
                                                    std::to_string(*free - std::min(*free, bytes)) +
                                                    " bytes free on " + dir + limit);
}

Status roomForWork(const std::string& dir, uint64_t reserve) {
  Result<uint64_t> free = freeBytes(dir);
  if (!free) return Status::infrastructure(Code::io_error, free.status().message());
  if (*free >= reserve / 2) return Status::success();
  return Status::infrastructure(Code::no_space, "only " + std::to_string(*free) + " bytes free on " + dir +
                                                    ", less than half of limits.disk_reserve_bytes (" +
                                                    std::to_string(reserve) + ")");
}

} // namespace hwfarm
