// A simulated board (driver = "qemu"): a QEMU machine whose UART0 is a local
// socket the serial driver connects to. Flash stages the ELF; power on starts
// QEMU, confined (docs/drivers.md, "Sandbox"): no semihosting, QEMU's own
// seccomp sandbox, and a bubblewrap view holding only its image and socket
// directory. The firmware reports its status on the console
// (`HWFARM END status=<n>`); power off stops QEMU. Above this interface it is
// a board like any other.
//
// Blocking calls (QEMU start-up, stop): run them off the event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "config/fleet_config.h"
#include "common/status.h"
#include "drivers/process_table.h"

namespace hwfarm::drivers {

// Which side of a run a simulator is on. QEMU hands it to the firmware as a
// 32-bit little-endian word in guest RAM at kSimIdentityAddress, written
// before the guest starts (QEMU's generic loader: `-device
// loader,addr=0x203fff00,data=<n>,data-len=4`): 1 for a target, 0 for a
// reference. The test firmware perturbs its outputs only as a target
// (docs/protocol.md, "The other variants"), so one image can disagree with
// itself. The address is in the MPS2 machines' data RAM, whose last 256
// bytes the test firmware leaves alone (tests/firmware/mps2.ld). An image
// that loads its own bytes there keeps them (QEMU 7.2 writes the image
// after the word): it sees no identity and loses nothing. On a machine with
// no memory there QEMU drops the write.
enum class SimRole : uint32_t {
  reference = 0, // a run's reference simulator (the default)
  target = 1,    // a fleet board (makeBoard, driver = "qemu"), or a simulator run as a target
};
inline constexpr uint32_t kSimIdentityAddress = 0x203FFF00;

// How QEMU ended by itself (it crashed, aborted, was killed from outside,
// its sandbox failed, or its guest reset), as its sandbox reported it:
// bubblewrap reports QEMU's exit status on --json-status-fd, 128 + N for a
// signal N.
struct QemuEnd {
  std::optional<int> exit_code; // QEMU exited with this status
  int signal = 0;               // or this signal killed it
  // bubblewrap ended without reporting QEMU's end (it was killed itself,
  // or could not start QEMU): exit_code or signal are bubblewrap's.
  bool sandbox = false;
  // The guest ended it: QEMU runs with -no-reboot, so a system reset (the
  // firmware's way to end a simulated run at once) stops it. QEMU then
  // exits with status 0 and says nothing, where a signal from the host
  // makes it say "terminating on signal N" in its log.
  bool guest = false;
  // `subject` and what happened: "the simulator exited with status 1",
  // "the simulator was killed by signal 6 (Aborted)", "the simulator's
  // sandbox was killed by signal 9 (Killed)", "the simulator was reset by
  // its firmware".
  std::string describe(const std::string& subject = "QEMU") const;
  Evidence evidence() const; // the exit code or the signal
};

class QemuBoard {
 public:
  // `work_dir` holds the staged image, QEMU's log and sock/, the directory of
  // its UART socket. `role` is the identity every power-on hands the
  // firmware.
  QemuBoard(std::string name, config::QemuConfig config, std::string work_dir,
            SimRole role = SimRole::reference);
  ~QemuBoard(); // powers off
  QemuBoard(const QemuBoard&) = delete;
  QemuBoard& operator=(const QemuBoard&) = delete;

  // Copies `image` into the work dir; the next power-on boots it.
  Status flash(const std::string& image);
  // Starts QEMU in its sandbox. QEMU holds the guest until a client connects
  // to the UART socket, so no output is lost: connect to `*console`
  // ("unix:/...") next. Fails (never runs QEMU unconfined) when the sandbox
  // cannot be set up: "cannot confine QEMU for board NAME: ...".
  Status powerOn(std::string* console);
  // Stops QEMU (SIGTERM, then SIGKILL after a grace period; the process
  // group is killed before it is reaped). It cannot fail: SIGKILL ends it.
  void powerOff();
  // Forgets the staged image (a new lease starts from nothing).
  void clearImage();
  // Whether QEMU runs; once it has exited on its own (it crashed, or its
  // sandbox failed), its exit status, or 128+signal, and how it ended.
  // Nothing after powerOff(). The firmware's own status is on its console,
  // not here.
  bool running();
  std::optional<int> exitStatus();
  std::optional<QemuEnd> end();
  // Waits up to `timeout` for QEMU to end by itself (its console closed,
  // say): how it ended, or nothing if it still runs or was powered off.
  std::optional<QemuEnd> waitEnd(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; } // bubblewrap's (which sets the sandbox up)
  SimRole role() const { return role_; }
  std::string logPath() const { return work_dir_ + "/" + name_ + ".qemu.log"; }

 private:
  void reap(bool block);
  // What bubblewrap reported on --json-status-fd: QEMU's exit status.
  std::optional<int> reportedExit();
  void closeHandles();
  // Starts QEMU inside bubblewrap, with or without a private /proc: through
  // the simulator launcher at `launcher`, or else by running `bwrap`.
  Status startSandboxed(const std::string& launcher, const std::string& bwrap, const std::string& qemu,
                        const std::string& image, const std::string& socket_dir, const std::string& socket,
                        bool with_proc, std::string* console);

  std::string name_;
  config::QemuConfig config_;
  std::string work_dir_;
  SimRole role_;
  std::string image_;
  pid_t pid_ = -1;
  int pidfd_ = -1;                         // bubblewrap's, to wait for its end; -1 without pidfds
  int launcher_ = -1;                      // the launcher's connection, when it started bubblewrap
  int status_fd_ = -1;                     // bubblewrap's --json-status-fd, read when it has ended
  std::optional<ProcessHandle> sandbox_;   // the sandbox's pid 1: QEMU's pid namespace ends with it
  std::optional<int> exit_status_;
  std::optional<QemuEnd> end_;             // how the last process ended, for a failed start too
};

// The simulator launcher (drivers/sim_launcher.h) every QEMU board started
// from now on asks to confine QEMU, by its socket's path; "" (the default):
// hwfarmd runs bubblewrap itself. Set at start-up (hwfarmd
// --simulator-launcher); any thread.
void setSimulatorLauncher(const std::string& socket_path);
std::string simulatorLauncher();

// bubblewrap's arguments, up to and including "--", for QEMU `qemu` booting
// `image` with its UART socket in `socket_dir`: /usr and the top-level links
// into it read-only, a private /dev (and /proc, `with_proc`), the image
// read-only, the socket directory, nothing else; every namespace new, no
// capabilities, no new user namespaces; `marks` (drivers/reaper.h) set in
// QEMU's environment, which is otherwise cleared.
std::vector<std::string> simulatorSandboxArgv(const std::string& bwrap, int info_fd, int status_fd,
                                              const std::vector<std::string>& marks, const std::string& qemu,
                                              const std::string& image, const std::string& socket_dir,
                                              bool with_proc);

// Whether a unix socket at `path` is listening, per `table` (a
// /proc/.../net/unix of the network namespace that holds it; false when it
// cannot be read).
bool unixSocketListening(const std::string& path, const std::string& table = "/proc/net/unix");

// What QEMU's log `qemu_log` says about a guest CPU that locked up (QEMU's
// "qemu: fatal: Lockup: can't escalate 3 to HardFault ...", after which it
// aborts): the firmware's failure, as it would be on a real core (a vector
// table that is garbage, a fault inside the fault handler). "" when the log
// says no such thing.
std::string guestLockup(const std::string& qemu_log);

// Why bubblewrap could not confine QEMU, from its own line ("bwrap: ..."):
// the line, and where bubblewrap could not create its namespaces, the two
// places that deny them (its advice names only the kernel's).
std::string sandboxRefusal(const std::string& bwrap_line);

} // namespace hwfarm::drivers
