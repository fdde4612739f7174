#include "daemon/app/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace hwfarm {

StateDirLock::StateDirLock(const std::string& path) : path_(path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw std::runtime_error("cannot create state directory " + path + ": " + ec.message());
  // Leases, consoles and the database are not for other local users.
  if (::chmod(path.c_str(), 0750) != 0)
    throw std::runtime_error("cannot chmod 0750 state directory " + path + ": " + std::strerror(errno));
  std::string lock = path + "/hwfarmd.lock";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) throw std::runtime_error("cannot open " + lock + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char pid[32] = {};
    ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw std::runtime_error("state directory " + path + " is in use by another hwfarmd (pid " + holder + ")");
    throw std::runtime_error("cannot lock " + lock + ": " + std::strerror(err));
  }
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
    // The pid is informational only; the lock is what matters.
  }
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

} // namespace hwfarm
