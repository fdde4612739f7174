#include "daemon/services/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hwfarm {

Status replaceFile(const std::string& path, std::string_view bytes) {
  if (Status placed = replaceFileUnsynced(path, bytes); !placed.ok()) return placed;
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  return syncFolder(dir.empty() ? "." : dir);
}

Status replaceFileUnsynced(const std::string& path, std::string_view bytes) {
  // Hidden (".NAME.tmp"): never listed among a run's files, and never the
  // name of another file written beside it (an artifact "x.tmp").
  const size_t slash = path.find_last_of('/');
  const std::string temp = slash == std::string::npos ? "." + path + ".tmp"
                                                      : path.substr(0, slash + 1) + "." + path.substr(slash + 1) + ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return Status::fromErrno("cannot create " + temp, errno);
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n >= 0) {
      off += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      Status failed = Status::fromErrno("cannot write " + temp, errno);
      ::close(fd);
      ::unlink(temp.c_str());
      return failed;
    }
  }
  // A temp file that did not become `path` is removed.
  bool synced = ::fsync(fd) == 0;
  int sync_errno = errno;
  if (::close(fd) != 0 || !synced) {
    Status failed = Status::fromErrno("cannot sync " + temp, synced ? errno : sync_errno);
    ::unlink(temp.c_str());
    return failed;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    Status failed = Status::fromErrno("cannot rename " + temp + " to " + path, errno);
    ::unlink(temp.c_str());
    return failed;
  }
  return Status::success();
}

Status syncFolder(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::fromErrno("cannot open " + dir, errno);
  bool synced = ::fsync(dfd) == 0;
  int sync_errno = errno;
  ::close(dfd);
  if (!synced) return Status::fromErrno("cannot sync " + dir, sync_errno);
  return Status::success();
}

} // namespace hwfarm
