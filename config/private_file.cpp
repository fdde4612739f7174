#include "config/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "config/loader.h"

namespace hwfarm::config {

std::optional<std::string> readPrivateFile(const std::string& path, const std::string& what, size_t max_bytes,
                                           std::string* text) {
  // The checks and the read use one descriptor: the file cannot be swapped
  // between them. O_NOFOLLOW refuses a symbolic link (another user could aim
  // it anywhere); O_NONBLOCK keeps a FIFO from blocking the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0 && errno == ELOOP) return what + " is a symbolic link; name the file itself (symbolic links are refused)";
  if (fd < 0) return std::string("cannot read file: ") + std::strerror(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::string("cannot read file: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return std::string("not a regular file");
  uid_t self = ::geteuid();
  if (st.st_uid != self && st.st_uid != 0)
    return what + " is owned by uid " + std::to_string(st.st_uid) + ", not by hwfarmd's user (uid " +
           std::to_string(self) + ") or root; run: chown " + std::to_string(self) + " " + path;
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return what + " is open to group or others (mode " + mode +
           "); only its owner may read or write it; run: chmod go-rwx " + path;
  }
  std::string error;
  if (!readTextFd(fd, text, &error, max_bytes)) {
    if (error.rfind("file is larger", 0) == 0) error += ", the limit for a " + what;
    return error;
  }
  return std::nullopt;
}

} // namespace hwfarm::config
