// daemon/services/open_beneath: a file opened by a client's or a firmware's
// name beneath a directory, through no symlink, with openat2 and with the
// walk used where the kernel lacks it: both refuse the same paths alike.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "daemon/services/open_beneath.h"
#include "tests/support/process.h"

using namespace hwfarm;
using namespace hwfarm::test;
namespace fs = std::filesystem;

namespace {

// A run directory with an artifact, a folder that is a symlink to a
// directory outside it holding a secret, and a symlink to the secret.
struct Tree {
  TempDir dir;
  int root = -1;
  Tree() {
    fs::create_directories(dir.file("run/traces"));
    fs::create_directories(dir.file("outside"));
    dir.write("run/traces/a.txt", "trace\n");
    dir.write("outside/secret.txt", "SECRET\n");
    fs::create_directory_symlink(dir.file("outside"), dir.file("run/evil"));
    fs::create_directory_symlink("../outside", dir.file("run/traces/up"));
    fs::create_symlink(dir.file("outside/secret.txt"), dir.file("run/traces/secret.txt"));
    root = ::open(dir.file("run").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(root >= 0);
  }
  ~Tree() { ::close(root); }
};

// What the open gave: the file's bytes, or its errno's name.
std::string opened(int (*open)(int, std::string_view, int), int dir, const std::string& path) {
  errno = 0;
  int fd = open(dir, path, O_RDONLY);
  if (fd < 0) {
    int e = errno;
    return e == ELOOP ? "ELOOP" : e == EXDEV ? "EXDEV" : e == ENOENT ? "ENOENT" : e == ENOTDIR ? "ENOTDIR"
                                                                                                : std::to_string(e);
  }
  bool cloexec = (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
  char buffer[64];
  ssize_t n = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  return std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0) + (cloexec ? "" : " (inheritable)");
}

} // namespace

TEST_CASE("openat2 and the walk open a file beneath the directory and nothing through a symlink") {
  auto [name, open] = GENERATE(table<const char*, int (*)(int, std::string_view, int)>(
      {{"openat2", openBeneath}, {"walk", openBeneathByWalk}}));
  INFO(name);
  Tree t;
  // Given a plain artifact, it is opened (close-on-exec), by a path with "." and "//" too;
  CHECK(opened(open, t.root, "traces/a.txt") == "trace\n");
  CHECK(opened(open, t.root, "./traces//a.txt") == "trace\n");
  // a folder that is a symlink to outside, absolute or relative, is never followed;
  CHECK(opened(open, t.root, "evil/secret.txt") == "ELOOP");
  CHECK(opened(open, t.root, "traces/up/secret.txt") == "ELOOP");
  // nor is a file that is a symlink;
  CHECK(opened(open, t.root, "traces/secret.txt") == "ELOOP");
  CHECK(opened(open, t.root, "evil") == "ELOOP");
  // ".." and absolute paths are refused before any lookup, even one that stays beneath;
  CHECK(opened(open, t.root, "../outside/secret.txt") == "EXDEV");
  CHECK(opened(open, t.root, "traces/../traces/a.txt") == "EXDEV");
  CHECK(opened(open, t.root, t.dir.file("outside/secret.txt")) == "EXDEV");
  // and what is missing or not a folder says so.
  CHECK(opened(open, t.root, "traces/b.txt") == "ENOENT");
  CHECK(opened(open, t.root, "") == "ENOENT");
  CHECK(opened(open, t.root, "traces/a.txt/x") == "ENOTDIR");
}

TEST_CASE("the walk closes every folder it opened on its way") {
  Tree t;
  auto descriptors = [] {
    size_t n = 0;
    for (auto it = fs::directory_iterator("/proc/self/fd"); it != fs::directory_iterator(); ++it) ++n;
    return n;
  };
  size_t before = descriptors();
  for (const char* path : {"traces/a.txt", "traces/up/secret.txt", "traces/b.txt", "traces/a.txt/x"}) {
    int fd = openBeneathByWalk(t.root, path, O_RDONLY);
    if (fd >= 0) ::close(fd);
  }
  CHECK(descriptors() == before);
}
