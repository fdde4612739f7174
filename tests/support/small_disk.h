// A small disk for a test: a tmpfs of a given size mounted on a directory,
// unmounted when the test ends. The tests run as root, as CI does; a test
// that cannot mount it fails.
#pragma once

#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace hwfarm::test {

struct SmallDisk {
  std::string dir;
  SmallDisk(std::string d, const std::string& size) : dir(std::move(d)) {
    std::filesystem::create_directories(dir);
    int rc = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0750").c_str());
    INFO("mount -t tmpfs -o size=" << size << " tmpfs " << dir << ": " << std::strerror(errno));
    REQUIRE(rc == 0);
  }
  ~SmallDisk() { ::umount2(dir.c_str(), MNT_DETACH); }
  // Fills the disk with `dir`/filler until at most `left` bytes are free (as
  // something else on the machine would). It writes in pieces and looks
  // again after each: a daemon writing beside it may take part of the space,
  // and a write refused for want of space means the disk is already full.
  void fillUntil(uint64_t left) const {
    int fd = ::open((dir + "/filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    INFO("open " << dir << "/filler: " << std::strerror(errno));
    REQUIRE(fd >= 0);
    struct Close {
      int fd;
      ~Close() { ::close(fd); }
    } close_filler{fd};
    auto freeBytes = [&] {
      struct statvfs fs {};
      REQUIRE(::statvfs(dir.c_str(), &fs) == 0);
      return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    };
    REQUIRE(freeBytes() > left);
    const std::string piece(1 << 20, 'f');
    for (;;) {
      const uint64_t free = freeBytes();
      if (free <= left) break;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), free - left));
      const ssize_t wrote = ::write(fd, piece.data(), n);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote < 0 && errno == ENOSPC) break;
      INFO("write " << dir << "/filler: " << std::strerror(errno));
      REQUIRE(wrote > 0);
    }
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
};

} // namespace hwfarm::test
