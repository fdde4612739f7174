// One image run start to end on a fresh simulator (a QEMU machine in its
// sandbox, as for simulated boards): the reference of a run. Never a fleet
// board; the run service bounds how many run at once (runs.max_simulators).
//
// Blocking: call it off the event loop.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "common/status.h"
#include "config/fleet_config.h"

namespace hwfarm::drivers {

struct SimulatorRun {
  std::string console;          // every byte its UART printed, at most `max_bytes`
  bool ended = false;           // an END record arrived (isEndRecord, common/console_line.h)
  bool timed_out = false;       // the deadline passed first
  bool truncated = false;       // more than max_bytes were printed
  // QEMU exited on its own (crashed, or reset or locked up before END): its
  // status, or 128 + the signal. After END only a crash is kept here.
  std::optional<int> qemu_exit;
  int qemu_signal = 0;          // the signal that ended it (aborted, killed from outside)
  // How it ended, when it did on its own: "the simulator exited with status
  // 1", "the simulator was killed by signal 6 (Aborted)", "the simulator's
  // sandbox was killed by signal 9 (Killed)".
  std::string qemu_end;
  // The guest CPU locked up and QEMU aborted (guestLockup, qemu_board.h):
  // what QEMU said. The firmware's failure, not the simulator's.
  std::string guest_lockup;
  // The firmware reset the simulator before its END record (QemuEnd::guest):
  // the firmware's failure too. After END a reset is its way to end at once.
  bool guest_reset = false;
  double seconds = 0;
  // When, in seconds from the start: its console connected (the sandbox
  // and QEMU up), the console's first byte, the END record; -1 if never.
  double connected_s = -1, first_byte_s = -1, end_s = -1;
};

struct SimulatorOptions {
  std::chrono::milliseconds deadline{30000};
  std::chrono::milliseconds drain{250}; // the console is still read this long after END
  size_t max_bytes = 8u << 20;
  const std::atomic<bool>* cancel = nullptr; // checked every 50 ms: stops QEMU and returns
};

// Boots `image` on QEMU `config` in `work_dir` (created; holds the staged
// image, QEMU's log and its socket), reads its console until its END record
// (the one END rule of every console, common/console_line.h) and the drain
// window after it (what follows END is kept), the deadline, a cancel, or
// QEMU's exit (a firmware that resets after END ends the drain: nothing
// can follow); then stops QEMU. An infrastructure Status when QEMU could not be started or
// its console not read.
Result<SimulatorRun> runSimulator(const std::string& name, const config::QemuConfig& config,
                                  const std::string& image, const std::string& work_dir,
                                  const SimulatorOptions& options);

} // namespace hwfarm::drivers
