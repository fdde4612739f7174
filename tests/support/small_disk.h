// A small disk for a test: a tmpfs of a given size mounted on a directory,
// unmounted when the test ends. The tests run as root, as CI does; a test
// that cannot mount it fails.
#pragma once

#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
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
  // Fills the disk with `dir`/filler until `left` bytes are free (as
  // something else on the machine would).
  void fillUntil(uint64_t left) const {
    struct statvfs fs {};
    REQUIRE(::statvfs(dir.c_str(), &fs) == 0);
    uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    REQUIRE(free > left);
    std::ofstream filler(dir + "/filler", std::ios::binary | std::ios::app);
    std::string bytes(free - left, 'f');
    REQUIRE(filler.write(bytes.data(), static_cast<std::streamsize>(bytes.size())));
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
};

} // namespace hwfarm::test
