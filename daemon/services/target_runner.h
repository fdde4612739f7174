// The seam between what runs on the lab and the lab (ninja's
// CommandRunner): flash, power and watch a board's console; run an image on
// a simulator; read recorded outputs. Runs (run_service.h) and health checks
// (health_checks.h) both boot boards through it, in the one sequence of
// core/run/boot.h, so the two cannot drift. BoardTargets (board_targets.h)
// is the real one, over the board service and a pool of simulators; a test
// may put a fault-injecting one in its place.
//
// Every result comes back on the event loop, never from inside the call
// that asked for it.
//
// Thread safety: every call on the event loop thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/console_line.h"
#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/lease/types.h"
#include "daemon/core/run/boot.h"
#include "daemon/core/run/targets.h"

namespace hwfarm {

// What a simulator printed and how it ended.
struct SimulatorResult {
  Status status;       // it did not start, or it crashed (infrastructure)
  std::string console; // every byte its UART printed, at most `max_bytes`
  bool truncated = false;
  bool timed_out = false; // its own deadline passed
  double seconds = 0;
  double connected_s = -1, first_byte_s = -1, end_s = -1; // simulator_run.h
};

struct SimulatorJob {
  std::string name;           // unique among the jobs running: its scratch directory's
  config::QemuConfig qemu;    // the machine
  std::string image;          // a file of a lease's image store, held until staged
  std::string owner;          // the lease it runs for: its share of the pool (core/run/simulator_share.h)
  std::chrono::milliseconds deadline{60000};
  std::chrono::milliseconds drain{250}; // its console is read this long after END
  size_t max_bytes = 8u << 20;
  // Set (any thread): the simulator stops and reports what it printed.
  std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
};

class TargetRunner {
 public:
  virtual ~TargetRunner() = default;

  // A configured board's type and kind (how it boots), or nullopt.
  virtual std::optional<run::BoardInfo> board(const std::string& name) const = 0;

  // Flashes `image` onto `board` for `lease`; `done` gets the result and
  // what the flasher printed.
  using FlashDone = std::function<void(Status status, std::string log)>;
  virtual void flash(const lease::Lease& lease, const std::string& board, const std::string& image,
                     FlashDone done) = 0;
  using Done = std::function<void(Status status)>;
  virtual void power(const lease::Lease& lease, const std::string& board, run::PowerStep step, Done done) = 0;
  // Powers `board` off once the work it has under way is done (a power-on
  // starting QEMU): no firmware keeps running for a run that ended.
  virtual void powerOff(const lease::Lease& lease, const std::string& board, Done done) = 0;
  // Every line `board`'s console prints from now on, as the console's line
  // reader cut it (common/console_line.h: no line end; whole() or a piece
  // of a longer line), goes to `on_line` (its text valid during the call),
  // and each close of its console to `on_closed`, until the returned
  // function runs (it may run from either). `end`, a simulated board's:
  // the firmware's failure when it ended its simulator itself (it locked
  // the core up, or reset it), an infrastructure failure when the
  // simulator crashed or was killed from outside, ok otherwise (a tty, a
  // simulator stopped by hwfarmd).
  using ConsoleClosed = std::function<void(const std::string& reason, const Status& end)>;
  virtual std::function<void()> watch(const std::string& board,
                                      std::function<void(const ConsoleLine& line)> on_line,
                                      ConsoleClosed on_closed) = 0;
  // `board` left lease `lease_id` (swapped out): its console closes, it is
  // reset.
  virtual void release(const std::string& lease_id, const std::string& board) = 0;

  // Runs `job` on a fresh simulator when one of the pool's places frees
  // and its owner is within its share: `started` when it starts, `ended`
  // with what it printed.
  virtual void simulate(SimulatorJob job, std::function<void()> started,
                        std::function<void(SimulatorResult)> ended) = 0;
  // Stops the job whose `stop` this is: a running simulator stops and
  // reports what it printed; a waiting one ends at once, never started.
  virtual void stopSimulator(const std::shared_ptr<std::atomic<bool>>& stop) = 0;
  // Reads recorded outputs (result-protocol text, core/run/golden.h).
  using ReadDone = std::function<void(Status status, std::string text)>;
  virtual void readGolden(const std::string& path, ReadDone done) = 0;
};

} // namespace hwfarm
