// hwfarm-launcher: confines simulated boards' QEMU for hwfarmd
// (drivers/sim_launcher.h; docs/operations.md, "Sandbox").
//
//   hwfarm-launcher                 serve the socket systemd passes
//                                   (hwfarm-launcher.socket)
//   hwfarm-launcher --listen PATH   serve a socket of its own at PATH (0600)
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon/app/version.h"
#include "drivers/sim_launcher.h"
#include "drivers/spawn.h"

namespace {

constexpr const char* kUsage =
    "usage: hwfarm-launcher [--listen PATH]\n"
    "       hwfarm-launcher --version | --help\n"
    "\n"
    "Runs simulated boards' QEMU in bubblewrap's sandbox for hwfarmd (hwfarmd\n"
    "--simulator-launcher PATH). Without --listen it serves the socket systemd\n"
    "passes (hwfarm-launcher.socket). Only its own user and root are served.\n";

// The socket systemd passed (sd_listen_fds(3): LISTEN_PID is this process,
// LISTEN_FDS is 1, the socket is descriptor 3), or -1.
int passedSocket() {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (!pid || !fds || std::strtol(pid, nullptr, 10) != ::getpid() || std::strcmp(fds, "1") != 0) return -1;
  int type = 0;
  socklen_t size = sizeof type;
  if (::getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &size) != 0 || type != SOCK_SEQPACKET) return -1;
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  return 3;
}

int listenAt(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    std::fprintf(stderr, "hwfarm-launcher: %s: path too long for a unix socket\n", path.c_str());
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ::unlink(path.c_str());
  mode_t old = ::umask(0177);  // 0600 from the start: no moment others may connect
  bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::umask(old);
  if (!bound || ::listen(fd, 64) != 0) {
    std::fprintf(stderr, "hwfarm-launcher: cannot listen at %s: %s\n", path.c_str(), std::strerror(errno));
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("hwfarm-launcher %s\n", hwfarm::kVersion);
      return 0;
    }
    if (arg == "--listen" && i + 1 < argc) {
      listen_path = argv[++i];
      continue;
    }
    std::fprintf(stderr, "hwfarm-launcher: unknown argument \"%s\"\n%s", arg.c_str(), kUsage);
    return 2;
  }
  // Descriptors 0-2 open (to /dev/null if they are not), so that none
  // received from hwfarmd lands there.
  for (int null_fd = 0; null_fd >= 0 && null_fd <= 2;) {
    if (::fcntl(null_fd, F_GETFD) >= 0) {
      ++null_fd;
      continue;
    }
    if (::open("/dev/null", O_RDWR) < 0) break;
  }
  int fd = listen_path.empty() ? passedSocket() : listenAt(listen_path);
  if (fd < 0) {
    if (listen_path.empty())
      std::fprintf(stderr, "hwfarm-launcher: no socket from systemd (LISTEN_FDS); use --listen PATH\n");
    return 1;
  }
  std::string bwrap = hwfarm::drivers::findProgram("bwrap");
  if (bwrap.empty())
    std::fprintf(stderr, "hwfarm-launcher: bwrap not found in PATH: every simulator will be refused\n");
  int rc = hwfarm::drivers::runLauncher(fd, bwrap);
  if (!listen_path.empty()) ::unlink(listen_path.c_str());
  return rc;
}
