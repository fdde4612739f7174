// QEMU in its sandbox (docs/drivers.md, "Sandbox"): bubblewrap around QEMU,
// set up either by this process or by the QEMU sandbox service.
//
// The service (hwfarm-qemu-sandbox, started per connection by systemd's
// hwfarm-qemu-sandbox.socket) lets hwfarmd's own unit go without the right
// to create namespaces and mount: only the small service, which has no
// network, may. hwfarmd uses it when $HWFARM_QEMU_SANDBOX names its socket
// (the packaged unit sets it), and otherwise runs bubblewrap itself.
//
// The service's protocol, on one connection per QEMU:
//   hwfarmd -> service  a 4-byte length (little-endian) and as many bytes:
//                       "hwfarm-qemu-sandbox/1", image, socket_dir, socket,
//                       with_proc ("0"/"1"), qemu, its arguments, each
//                       NUL-terminated; with the first byte, three
//                       descriptors (SCM_RIGHTS): the image (read), the socket
//                       directory (O_PATH) and the log (append).
//   service -> hwfarmd  one line: "ready PID" once QEMU listens on its
//                       socket, or "failed exit|signal|none N MESSAGE";
//                       after "ready", "ended exit|signal N" when QEMU ends.
//   hwfarmd closing its end stops QEMU (the service kills the sandbox's
//   process group, reaps it and exits); so does the service's end.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hwfarm::drivers {

// What runs in the sandbox and what it sees besides /usr.
struct SandboxSpec {
  std::string board;      // for messages
  std::string image;      // absolute: read-only at the same path inside
  std::string socket_dir; // absolute: read-write at the same path inside; QEMU's working directory
  std::string socket;     // the UART socket QEMU listens on, in socket_dir
  std::string qemu;       // absolute path of the QEMU binary (or a wrapper)
  std::vector<std::string> qemu_args;
};

// One QEMU in its sandbox.
class Sandbox {
 public:
  virtual ~Sandbox() = default;
  // Whether it still runs; once it has ended on its own, how (exit status
  // or 128+signal, with the evidence).
  virtual bool running() = 0;
  virtual std::optional<int> exitStatus() = 0;
  virtual Evidence exitEvidence() = 0;
  // Ends it (SIGTERM, then SIGKILL after a grace period); returns once it
  // is gone. It cannot fail.
  virtual void stop() = 0;
  // The sandbox's process (bubblewrap), as this process sees it.
  virtual pid_t pid() const = 0;
};

// Starts `spec` and waits (up to 10 s) until QEMU listens on its socket,
// its output appended to `log_path`. Through the service at
// `service_socket` when it is not empty, else as a child of this process
// (bubblewrap found in PATH). Fails closed: QEMU never runs unconfined.
// "cannot confine QEMU for board B: ..." when the sandbox cannot be made,
// "QEMU did not start for board B (see LOG)" when QEMU failed in it.
Result<std::unique_ptr<Sandbox>> startSandbox(const SandboxSpec& spec, const std::string& log_path,
                                              const std::string& service_socket);

// The service's side of one connection on `fd` (hwfarm-qemu-sandbox's
// main): reads the request, starts the sandbox, answers, and stops it when
// hwfarmd hangs up. Returns the process exit code.
int serveSandboxRequest(int fd);

// Whether a unix socket at `path` is listening, per `table` (a
// /proc/.../net/unix of the network namespace that holds it; false when it
// cannot be read).
bool unixSocketListening(const std::string& path, const std::string& table = "/proc/net/unix");

} // namespace hwfarm::drivers
