// The simulator launcher: a small service that confines simulated boards'
// QEMU for hwfarmd, so that hwfarmd itself may create no namespaces.
//
// bubblewrap (docs/drivers.md, "Sandbox") needs new user, mount, pid,
// network, IPC, UTS and cgroup namespaces. Run by hwfarmd, that permission
// is hwfarmd's: its unit must allow every namespace and the mount calls. Run
// by hwfarm-launcher (its own unit, socket-activated), hwfarmd's unit denies
// them all, and the launcher only ever runs bubblewrap with the fixed
// sandbox of simulatorSandboxArgv around a QEMU command line: whoever
// controls hwfarmd still gets no namespace of its own.
//
// Protocol, over a unix SOCK_SEQPACKET connection, one simulator each
// (every message one packet):
//   hwfarmd → launcher  a LaunchRequest (encodeLaunchRequest) with three
//                       descriptors: QEMU's log (its stdout and stderr) and
//                       the write ends of bubblewrap's --info-fd and
//                       --json-status-fd pipes
//   launcher → hwfarmd  "pid N" (bubblewrap runs, a process group leader) or
//                       "error MESSAGE" (then the connection closes)
//   hwfarmd → launcher  "signal 9": the sandbox (bubblewrap's child) and
//                       bubblewrap's group are killed
//   launcher → hwfarmd  "exit RAW": bubblewrap ended with wait status RAW,
//                       its group killed and itself reaped (then it closes)
// When hwfarmd closes its end (power off, or hwfarmd died, however), the
// launcher kills the sandbox (bubblewrap's child, QEMU's pid namespace)
// and bubblewrap's group, reaps bubblewrap and closes. Only a peer with
// the launcher's own uid (or root) is served.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hwfarm::drivers {

struct LaunchRequest {
  std::string image;               // absolute: bound read-only
  std::string socket_dir;          // absolute: bound read-write, QEMU's working directory
  bool with_proc = true;           // a private /proc in the sandbox
  std::vector<std::string> marks;  // "KEY=VALUE": hwfarmd's marks (drivers/reaper.h)
  std::vector<std::string> qemu;   // QEMU's argv; [0] an absolute path
};

inline constexpr size_t kLaunchRequestMax = 64 * 1024;  // bytes of one request
inline constexpr size_t kLaunchArgsMax = 512;           // QEMU arguments
inline constexpr size_t kLaunchMarksMax = 16;

// "hwfarm-launch 1\0" then one "key=value\0" field each: image=,
// socket_dir=, proc=0|1, mark= (repeated), arg= (repeated, in order).
std::string encodeLaunchRequest(const LaunchRequest& request);
// The request, or what is wrong with it ("launch request: ..."): unknown
// version or field, a path not absolute, no QEMU, more than the limits
// above, a mark that is not one of hwfarmd's marks.
Result<LaunchRequest> parseLaunchRequest(std::string_view payload);

// The client side, used by QemuBoard: connects to the launcher at
// `socket_path`, sends `request` with `log_fd`, `info_fd` and `status_fd`,
// and waits (up to 10 s) for its answer. On success, bubblewrap's pid and
// the connection (owned by the caller: reap() reads "exit RAW" from it,
// closing it stops the simulator).
struct LaunchedSandbox {
  pid_t pid = -1;
  int connection = -1;
};
Result<LaunchedSandbox> launchSandbox(const std::string& socket_path, const LaunchRequest& request, int log_fd,
                                      int info_fd, int status_fd);
// Sends `payload` as one packet on the unix socket `fd`, with `fds` passed
// along (SCM_RIGHTS); false with errno when it was not sent whole.
bool sendWithDescriptors(int fd, std::string_view payload, const std::vector<int>& fds);
// Sends "signal N" on a launcher connection (false when it is gone); the
// launcher acts on 9 only.
bool signalLaunched(int connection, int signal);
// After `connection` became readable: the raw wait status the launcher
// reported, or, when it closed without one (the launcher died), SIGKILL's.
int readLaunchedExit(int connection);

// The server: serves `listen_fd` (a listening SOCK_SEQPACKET socket) until
// SIGTERM or SIGINT, then stops every simulator it runs and returns 0.
// `bwrap` is bubblewrap's path. Logs one line per simulator to stderr.
int runLauncher(int listen_fd, const std::string& bwrap);

}  // namespace hwfarm::drivers
