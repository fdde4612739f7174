#include "daemon/services/disk_room.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
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

Status roomForWork(const std::string& dir, uint64_t reserve) { return roomForWork(dir, freeBytes(dir), reserve); }

Status roomForWork(const std::string& dir, const Result<uint64_t>& free, uint64_t reserve) {
  if (!free) return Status::infrastructure(Code::io_error, free.status().message());
  if (*free >= reserve / 2) return Status::success();
  return Status::infrastructure(Code::no_space, "only " + std::to_string(*free) + " bytes free on " + dir +
                                                    ", less than half of limits.disk_reserve_bytes (" +
                                                    std::to_string(reserve) + ")");
}

std::string tendBallast(const std::string& dir, uint64_t reserve) {
  const std::string path = dir + "/.ballast";
  const uint64_t size = std::min<uint64_t>(reserve / 4, 4 << 20);
  struct stat st {};
  bool present = ::stat(path.c_str(), &st) == 0;
  Result<uint64_t> free = freeBytes(dir);
  if (!free) return free.status().message();
  if (present && (size == 0 || *free < static_cast<uint64_t>(st.st_size))) {
    if (::unlink(path.c_str()) != 0) return Status::fromErrno("cannot remove the ballast " + path, errno).message();
    return "removed the ballast " + path + " (" + std::to_string(st.st_size) + " bytes): only " +
           std::to_string(*free) + " bytes were free, too few to open the database";
  }
  if (present || size == 0 || *free < reserve / 2 + size) return "";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::fromErrno("cannot make the ballast " + path, errno).message();
  int e = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  ::close(fd);
  if (e != 0) {
    ::unlink(path.c_str());
    return Status::fromErrno("cannot make the ballast " + path, e).message();
  }
  return "made the ballast " + path + " (" + std::to_string(size) +
         " bytes: removed at a start with no room to open the database)";
}

} // namespace hwfarm
