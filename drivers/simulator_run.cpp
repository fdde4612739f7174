#include "drivers/simulator_run.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/console_line.h"
#include "drivers/qemu_board.h"
#include "drivers/serial_port.h"

namespace hwfarm::drivers {
namespace {

// How long QEMU's sandbox may take to exit after QEMU closed its console.
constexpr std::chrono::seconds kEndReportWait{5};

} // namespace

Result<SimulatorRun> runSimulator(const std::string& name, const config::QemuConfig& config,
                                  const std::string& image, const std::string& work_dir,
                                  const SimulatorOptions& options) {
  auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec) return Status::infrastructure(Code::io_error, "cannot create " + work_dir + ": " + ec.message());
  QemuBoard qemu(name, config, work_dir);
  if (Status s = qemu.flash(image); !s.ok()) return s;
  std::string console;
  if (Status s = qemu.powerOn(&console); !s.ok()) return s;
  Result<int> fd = connectUnixSocket(console.rfind("unix:", 0) == 0 ? console.substr(5) : console);
  if (!fd) {
    qemu.powerOff();
    return std::move(fd).takeStatus().withContext("simulator " + name);
  }
  SimulatorRun run;
  auto since = [&started] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  run.connected_s = since();
  auto deadline = started + options.deadline;
  // After END the console is read for options.drain more (a record after
  // END fails the run), or until QEMU ends.
  std::optional<std::chrono::steady_clock::time_point> drain_until;
  bool closed = false;
  LineReader lines; // the one line reader and END rule of every console
  char buffer[65536];
  while (true) {
    if (options.cancel && options.cancel->load()) break;
    auto now = std::chrono::steady_clock::now();
    if (drain_until && now >= *drain_until) break;
    if (now >= deadline) {
      run.timed_out = !run.ended;
      break;
    }
    auto until = drain_until ? std::min(deadline, *drain_until) : deadline;
    int wait_ms = static_cast<int>(
        std::min<int64_t>(50, std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1));
    pollfd p{*fd, POLLIN, 0};
    int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      if (!qemu.running()) {
        closed = true; // QEMU exited: the socket closes too
        break;
      }
      continue;
    }
    ssize_t got = ::read(*fd, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      closed = true; // QEMU closed the console: it is ending
      break;
    }
    size_t room = options.max_bytes - std::min(options.max_bytes, run.console.size());
    if (static_cast<size_t>(got) > room) run.truncated = true;
    std::string_view kept(buffer, std::min(room, static_cast<size_t>(got)));
    // Bytes after the END line's end stay in the console: whatever else
    // the firmware printed by then.
    if (run.first_byte_s < 0 && got > 0) run.first_byte_s = since();
    run.console.append(kept);
    lines.feed(kept, [&run](const ConsoleLine& line) { run.ended = run.ended || isEndRecord(line); });
    if (run.ended && !drain_until) {
      run.end_s = since();
      drain_until = std::chrono::steady_clock::now() + options.drain;
    }
    if (run.truncated) break;
  }
  ::close(*fd);
  // The console closes a moment before the sandbox reports QEMU's end.
  // After END the firmware's own end (a reset, a lockup) is the run's end;
  // a crash then is not (what the drain window was to read never came).
  if (closed)
    if (std::optional<QemuEnd> end = qemu.waitEnd(kEndReportWait)) {
      std::string lockup = guestLockup(qemu.logPath());
      if (!run.ended || (!end->guest && lockup.empty())) {
        run.qemu_exit = qemu.exitStatus();
        run.qemu_signal = end->signal;
        run.qemu_end = (run.ended ? "after END, in the drain window: " : "") + end->describe("the simulator");
        run.guest_lockup = lockup;
        run.guest_reset = end->guest;
      }
    }
  qemu.powerOff();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return run;
}

} // namespace hwfarm::drivers
