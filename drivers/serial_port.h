// A board's console: a tty (raw termios, exclusive while open: TIOCEXCL
// plus a UUCP lock file), or a local socket (QEMU's UART). Reads are event
// driven on the daemon's io_context; complete lines are handed out, and a
// port that disappears mid-read is reported once, not spun on.
//
// Thread safety: use from the io_context's thread only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>

#include "common/console_line.h"
#include "common/status.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm::drivers {

class ConsoleLog;

struct SerialOptions {
  int64_t baud = 115200;
  std::string lock_dir = "/var/lock"; // UUCP lock files (LCK..ttyACM0); empty: none
  size_t max_line = kMaxLineBytes;    // longer lines come out in pieces (common/console_line.h)
};

// A blocking socket of `type` (SOCK_STREAM: a simulator's UART;
// SOCK_SEQPACKET: the simulator launcher) connected to the unix socket at
// `path`, close-on-exec; a path longer than a socket address holds is
// reached through its directory. Failures: "FAILURE: ..." with `failure`
// "cannot connect to PATH" unless given (Code::invalid_argument for a name
// that does not fit even so).
Result<int> connectUnixSocket(const std::string& path, int type = SOCK_STREAM, std::string failure = "");

class SerialPort {
 public:
  // A line (or a piece of a long one) as the one console line reader cut
  // it; its text is valid during the call.
  using LineHandler = std::function<void(const ConsoleLine& line)>;
  using ClosedHandler = std::function<void(const std::string& reason)>;

  // Opens a tty path or "unix:/path" (a connected socket). On failure an
  // infrastructure Status says why: "/dev/ttyACM0 is locked by pid 812 (...)"
  // (Code::busy), "cannot open /dev/ttyACM0: No such file or directory", ...
  static Result<std::unique_ptr<SerialPort>> open(boost::asio::io_context& io, const std::string& path,
                                                  const SerialOptions& options);
  ~SerialPort(); // closes and removes the lock file

  // Starts reading. Lines, as common/console_line.h's LineReader cuts them
  // (without the newline and a "\r" before it; pieces of max_line bytes for
  // a longer line), go to `on_line` and to `log` (may be null); a line
  // without its end when the port ends goes out as LineEnd::console_end.
  // `on_closed` runs once when the port ends (EOF, hang-up, EIO when a USB
  // device leaves). `log` must outlive the reading, or this port.
  void start(LineHandler on_line, ClosedHandler on_closed, ConsoleLog* log);

  // Calls `done` with the first line matching `pattern` from now on, or with
  // nothing when `timeout` passes or the port closes first.
  void expect(const std::regex& pattern, std::chrono::milliseconds timeout,
              std::function<void(std::optional<std::string>)> done);

  // Ends the port now. Neither `on_line` nor `on_closed` runs during or
  // after it (not even for data already read); pending expects get nothing.
  void close();
  uint64_t bytesRead() const;
  bool closed() const;
  const std::string& path() const;

 private:
  struct Impl;
  explicit SerialPort(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

} // namespace hwfarm::drivers
