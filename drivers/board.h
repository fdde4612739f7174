// One board as the daemon drives it, whatever its driver. Backends are
// chosen by the config's `driver =` key through makeBoard() (STYLE.md
// habit 4); tests swap the environment (ptys, QEMU), not this code.
//
// flash() and power() return hwfarm::Status: every failure is an
// infrastructure failure, with the tool's exit status or signal and output
// tail as evidence where a tool ran. They block (external tools, QEMU start-up): the daemon calls
// them off its event loop.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "config/fleet_config.h"
#include "drivers/power.h"

namespace hwfarm::drivers {

// How a board's own process (a simulated board's QEMU) ended by itself.
struct ProcessEnd {
  // It crashed or was killed from outside: "QEMU was killed by signal 9
  // (Killed)", with the signal or exit code as evidence. The lab's.
  Status crashed;
  // Or its firmware ended it, as it would end a real core: it locked the
  // guest CPU up (`lockup`: what QEMU said, guestLockup in
  // drivers/qemu_board.h), or reset it (`reset`: QemuEnd::guest).
  std::string lockup;
  bool reset = false;
  Evidence evidence; // the firmware's end: QEMU's exit status or signal
};

class Board {
 public:
  virtual ~Board() = default;
  // Writes `image`; the tool's output goes to `log_path`.
  virtual Status flash(const std::string& image, const std::string& log_path) = 0;
  virtual Status power(PowerAction action, const std::string& log_path) = 0;
  // Where its console is now ("/dev/ttyACM0", "unix:/..."), or
  // Code::unavailable saying why there is none (e.g. a simulated board that
  // is off).
  virtual Result<std::string> console() = 0;
  // Leaves the board safe after a lease: simulated boards stop.
  virtual void reset() = 0;
  // How the board's own process ended by itself, once its console closed
  // (nothing when it did not: it runs, or was powered off; and always for a
  // board on USB). Waits up to `timeout` for the process to end. Blocking.
  virtual ProcessEnd processEnd(std::chrono::milliseconds timeout) {
    (void)timeout;
    return {};
  }
  // True when the console exists only while powered (a simulator's socket);
  // false for a tty, which is opened before power or flash so that nothing
  // the board prints right after is lost.
  virtual bool consoleFollowsPower() const = 0;
};

// Finds the console tty of a USB board whose serial.port is "auto" ("" when
// it is not plugged in).
using TtyResolver = std::function<std::string(const std::string& board)>;

// `work_dir`: scratch space for this board (staged images, QEMU sockets).
std::unique_ptr<Board> makeBoard(const config::BoardConfig& config, const std::string& work_dir,
                                 TtyResolver resolve_tty = nullptr);

} // namespace hwfarm::drivers
