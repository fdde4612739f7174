// Starting a child process cleanly (STYLE.md habit 15), shared by the tool
// runner (flashers, power switches) and simulated boards (QEMU):
//   - its own process group (a deadline or power-off kills every descendant);
//   - no descriptor of hwfarmd: everything above stderr is closed between
//     fork and exec (close_range), except the descriptors passed on purpose;
//   - an empty signal mask and default dispositions (hwfarmd blocks and
//     ignores signals its children must not inherit);
//   - marked as hwfarmd's (HWFARM_INSTANCE, HWFARM_OWNER, HWFARM_CHILD in
//     its environment, drivers/reaper.h), so that it and everything it
//     starts die with hwfarmd, however hwfarmd dies;
//   - an exec failure reported to the caller (over a close-on-exec pipe), not
//     discovered later as a mysterious exit status.
//
// Thread safety: any thread. Everything the child needs is prepared before
// fork(); the child calls only async-signal-safe functions.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hwfarm::drivers {

struct SpawnOptions {
  // argv[0] is run as is (execv, no PATH search): resolve it first.
  std::vector<std::string> argv;
  int stdin_fd = -1;  // -1: /dev/null
  int stdout_fd = -1; // -1: /dev/null
  int stderr_fd = -1; // -1: /dev/null
  // Descriptors the child keeps at the same numbers (their close-on-exec
  // flag cleared in the child only). Every other descriptor above 2 is closed.
  std::vector<int> keep_fds;
  // Instead: the child gets keep_fds[i] at 3 + i (what a program told "use
  // descriptor 3" needs, whatever numbers the caller holds them at).
  bool renumber_keep_fds = false;
  // The child's whole environment, instead of this process's with its marks
  // (childEnvironment): the simulator launcher gives a sandbox the marks of
  // the hwfarmd that asked for it.
  std::optional<std::vector<std::string>> environment;
  // What it is, for the log of whoever stops it after hwfarmd died
  // ("QEMU simulator sim-0", "flasher of board b1"): its HWFARM_CHILD.
  std::string what;
};

// The child's pid (> 0: it runs, a process group leader; the caller reaps
// it), or why not as an infrastructure failure: "fork: ...", "cannot run
// PROGRAM: No such file or directory".
Result<pid_t> spawnProcess(const SpawnOptions& options);

// Resolves `program` as execvp would: a name with '/' as is, otherwise the
// first executable match in PATH. "" when there is none.
std::string findProgram(const std::string& program);

// Ends a child started by spawnProcess whose group may outlive it: waits for
// `pid` to exit (without reaping it, so its pid and group id cannot be reused
// meanwhile), SIGKILLs what is left of its process group, then reaps it.
// Returns the raw wait status. REQUIRES: `pid` is an unreaped child that has
// exited or is about to (the caller signalled it).
int killGroupAndReap(pid_t pid);

} // namespace hwfarm::drivers
