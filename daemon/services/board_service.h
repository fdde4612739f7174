// What a lease holder can do with its boards: flash, power and watch the
// console. Driver calls that block (flashers, QEMU start/stop) run on a
// worker thread per board and post their results back to the event loop. Each leased
// board's console is captured to <state_dir>/consoles/<lease>/<board>.log
// while the lease lasts, and streamed to any number of readers. A simulated
// board is stopped once its firmware prints `HWFARM END`. Durations are
// measured on the Clock it is given.
//
// Thread safety: every public call on the event loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "common/console_line.h"
#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease/types.h"
#include "drivers/power.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class BoardService {
 public:
  // `resolve_tty` finds the console of USB boards with serial.port = "auto".
  // `clock` must outlive the service.
  BoardService(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
               std::function<std::string(const std::string& board)> resolve_tty);
  ~BoardService();

  void reconfigure(const config::FleetConfig& config);

  // A failed flash or power is an infrastructure Status whose evidence has
  // the tool's exit status or signal and output tail (when a tool ran) and
  // the last lines the board's console printed during this lease. A board
  // busy with another operation answers Code::busy, one without a power
  // switch Code::unsupported: refusals, with no failure class.
  using Done = std::function<void(Status status, double seconds)>;
  // A flash's answer also has what its flasher printed (its part of the
  // board's flash log).
  using FlashDone = std::function<void(Status status, double seconds, std::string output)>;
  // REQUIRES: `lease` is active and holds `board` (the router checks).
  // `image` is a file in the lease's image store (image_store.h).
  void flash(const lease::Lease& lease, const std::string& board, const std::string& image, FlashDone done);
  // Copies the open server-side image `fd` (checked by openServerImage; this
  // call owns it) into the lease's image store off the event loop, then
  // flashes the stored copy. `ext` is the stored extension.
  void flashCopy(const lease::Lease& lease, const std::string& board, int fd, const std::string& ext,
                 FlashDone done);
  void power(const lease::Lease& lease, const std::string& board, drivers::PowerAction action, Done done);
  // Powers `board` off; while another operation of it runs (a power-on
  // starting QEMU), once that one is done instead of refusing.
  void powerOffWhenIdle(const lease::Lease& lease, const std::string& board, Done done);

  // Streams the console: first what was captured during this lease, then
  // live lines, until the console closes, the lease ends or `cancel` runs.
  // The capture is read from its log file a piece (64 KiB) at a time, the
  // next piece once the reader has sent the last one on (`queued` falls to
  // 0 and `on_drained` fires), so a reader holds little memory whatever the
  // file's size; live lines follow once the reader reached the file's end.
  // `write` returns false when the reader is gone. Returns why when the
  // console cannot be opened (and nothing was captured to replay).
  struct Reader {
    std::function<bool(const std::string& text)> write;
    std::function<void()> end;
    std::function<size_t()> queued;                            // bytes written, not yet sent on
    std::function<void(std::function<void()>)> on_drained;     // registers what runs when queued() is 0
  };
  Status readConsole(const lease::Lease& lease, const std::string& board, Reader reader,
                     std::function<void()>* cancel);
  // Every console line `board` prints from now on, as the console's line
  // reader cut it (no timestamp, no line end; whole() or a cut piece),
  // goes to `on_line`, and each close of its console (a simulator stopped,
  // a tty gone) to `on_closed`, until the returned function runs (it must
  // run before this service ends). The run service watches its targets
  // this way. A simulator's close is told once its QEMU's end is known:
  // `end` is the firmware's failure when the firmware ended it (it locked
  // the core up, or reset it), an infrastructure failure when QEMU crashed
  // or was killed from outside, ok otherwise (stopped by hwfarmd, a tty).
  using ConsoleClosed = std::function<void(const std::string& reason, const Status& end)>;
  std::function<void()> watchConsole(const std::string& board, std::function<void(const ConsoleLine& line)> on_line,
                                     ConsoleClosed on_closed);
  // Console readers open for `lease_id`, over all its boards.
  size_t consoleReaders(const std::string& lease_id) const;

  // The lease is over: consoles close, readers end, simulated boards stop.
  void leaseEnded(const lease::Lease& lease);
  // `board` left the still active lease `lease_id` (swapped out for another
  // board): its console closes, its readers end, it is reset (a simulated
  // board stops), as if that lease had ended for it alone.
  void boardLeftLease(const std::string& lease_id, const std::string& board);
  // Removes, off the event loop, the log directories (consoles/<lease>) of
  // leases not in `active` whose newest file is older than `cutoff_unix_ms`;
  // then `done` runs on the loop with how many it removed.
  void pruneLogs(int64_t cutoff_unix_ms, std::set<std::string> active, std::function<void(size_t removed)> done);
  // Removes, off the event loop, the image stores of `ended` leases: those
  // that ended while hwfarmd was down (at start-up; leaseEnded covers the
  // rest). Their logs stay.
  void removeImageStores(std::set<std::string> ended);
  // Shutdown: closes every console and ends every reader.
  void stop();
  // Runs (on the loop) before a console path is looked up again, so USB
  // discovery can find a tty that bound after its device arrived.
  void onConsoleLookup(std::function<void()> refresh);

  // The lease's image store, <state_dir>/consoles/<lease>/images; created
  // on demand, removed with everything in it when the lease ends, once the
  // lease's boards have finished their work.
  std::string imageDir(const std::string& lease_id) const;
  // Keeps `path` (a file of a lease's image store) when a board's new image
  // supersedes it, until the returned function runs (a run's reference
  // still to stage it); it stays until its lease's store is removed or a
  // board supersedes it again. Event loop thread only.
  std::function<void()> holdImage(const std::string& path);
  // Creates imageDir(lease_id); on failure an infrastructure Status naming
  // the path.
  Status makeImageDir(const std::string& lease_id);

  // Where `board`'s console is now (its tty, a simulator's socket), looked
  // up again after onConsoleLookup's refresh when it is not found; why not
  // (not_found: not configured; unavailable: not present, or off).
  Result<std::string> consolePath(const std::string& board);
  // Removes `board`'s console log of `lease_id` (a health check's, which
  // each check writes afresh).
  void clearConsoleLog(const std::string& lease_id, const std::string& board);

  std::string consoleLogPath(const std::string& lease_id, const std::string& board) const;
  std::string flashLogPath(const std::string& lease_id, const std::string& board) const;
  std::string powerLogPath(const std::string& lease_id, const std::string& board) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
