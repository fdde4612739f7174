// The run service: runs test images on a lease's boards and on a reference
// simulator, parses each console (core/run/protocol), holds every target
// against the reference (core/run/report) and writes the run's artifacts
// under <state_dir>/runs/<run-id>/ (docs/runs.md).
//
// Per image and target: flash, power-cycle, capture the console until
// `HWFARM END` or the deadline. Boards run in parallel; references run on
// their own pool of simulators (at most runs.max_simulators at once), so an
// image on two boards and the reference takes about as long as the slowest
// of the three.
//
// A run is a durable record: its summary.json is written when it starts and
// when it ends; a run hwfarmd finds "running" at start-up (it was killed
// mid-run) is marked interrupted, an infrastructure failure.
//
// Thread safety: every public call on the event loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease/types.h"
#include "daemon/core/run/thresholds.h"
#include "daemon/services/board_service.h"
#include "daemon/services/run_events.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

namespace store {
class Database;
}

struct RunImage {
  std::string name; // as the client named it (a file name, a manifest name)
  std::string path; // the image in the lease's image store
  // What the reference runs instead of `path` (its own build of the test,
  // for the simulator's machine); empty: the image itself. In the store.
  std::string reference_path;
  // With RunSpec::golden: the outputs the reference "prints", as
  // result-protocol text (core/run/golden.h), in the store (<sha256>.golden).
  std::string golden_path;
};

struct RunSpec {
  std::vector<RunImage> images;
  // shard: each image on one board, the first that is free; each: every
  // image on every board.
  enum class Mode { shard, each } mode = Mode::shard;
  bool reference = true;           // false: no reference (PASS/FAIL only)
  // With `reference`: no simulator runs; each image's golden_path is its
  // reference (recorded outputs, named "golden_ref").
  bool golden = false;
  std::string suite; // the suite's name (a manifest's `suite`): the record's and junit.xml's; empty: none
  std::string commit; // what the images were built from (the record's "commit", the upload key's); empty: none
  // The targets, in order (empty: every present board of the lease). Each
  // is a board of the lease, a board type (the next board of the lease of
  // that type no earlier entry took: a type listed twice takes two boards),
  // or kSimulatorTarget (the reference simulator run as a target too).
  std::vector<std::string> boards;
  // Retry a target's infrastructure failure once, on another board of its
  // type swapped into the lease (setBoardSwapper).
  bool retry = true;
  int64_t deadline_ms = 60000;     // per image and target, from the power-on
  std::vector<run::ThresholdRule> thresholds; // per image, case or output (core/run/thresholds.h)
};

// The target that names the reference's simulator (RunSpec::boards).
inline constexpr std::string_view kSimulatorTarget = "qemu";

enum class RunState { running, passed, failed, error, cancelled, interrupted };
std::string_view runStateName(RunState s);

struct RunSummary {
  std::string id;
  std::string lease_id;
  RunState state = RunState::running;
  int64_t created_ms = 0;
  int64_t ended_ms = 0;
  std::string json; // summary.json as it stands
};

struct RunMetrics {
  std::map<std::string, uint64_t> ended; // runs ended, by state name
  uint64_t attempts = 0;                 // image-on-target attempts judged
  uint64_t infrastructure_failures = 0;  // attempts failed the lab's way
  uint64_t test_failures = 0;            // attempts failed the firmware's way
};

class RunService {
 public:
  // Keeps its records in `db` (the daemon's database: it adds its tables;
  // REQUIRES: not started yet) and restores them.
  RunService(boost::asio::io_context& io, const config::FleetConfig& config, BoardService& boards,
             const Clock& clock, store::Database& db);
  ~RunService();

  void reconfigure(const config::FleetConfig& config);

  // Starts a run on `lease`'s boards. Refused at once (`done` is not
  // called): Code::invalid_argument saying what is wrong with `spec` (no
  // image, a target not in the lease, no reference simulator for a board
  // type), Code::busy (runs.max_runs). Otherwise `done` gets the run's id
  // once its record is stored (the run then starts), or the store's error.
  using StartDone = std::function<void(const Result<std::string>&)>;
  Status start(const lease::Lease& lease, RunSpec spec, StartDone done);
  // Cancels a running run: its boards are powered off, its simulators
  // stopped, its record says why. Code::not_found, or conflict when it has
  // ended already.
  Status cancel(const std::string& id, const std::string& reason);
  // The lease ended: its runs are cancelled.
  void leaseEnded(const lease::Lease& lease);

  const RunSummary* find(const std::string& id) const;
  size_t runningCount() const;
  const RunMetrics& metrics() const;
  // Newest first.
  std::vector<const RunSummary*> list() const;
  // <state_dir>/runs/<id>: the run's artifacts.
  std::string runDir(const std::string& id) const;
  // Follows run `id`'s progress: `on_event` gets its record as the first
  // line, then a line per change, and last (last = true) the end line once
  // the run's artifacts are written (daemon/services/run_events.h). An ended
  // run's two lines come before watch() returns. Returns the unwatch
  // (callable any time, also after the end line), or nullptr when there is
  // no run `id`.
  std::function<void()> watch(const std::string& id, RunEventSink on_event);
  // Watchers of run `id` now.
  size_t watcherCount(const std::string& id) const;
  // Runs when a run ends, after its artifacts are written (every hook
  // given, in order).
  void onRunEnded(std::function<void(const RunSummary&)> hook);
  // Runs for each attempt of an ended run that failed the lab's way: its
  // lease, its board (empty for the reference simulator) and why.
  using InfraHook = std::function<void(const std::string& lease_id, const std::string& board, const std::string& why)>;
  void onInfrastructureFailure(InfraHook hook);
  // How an infrastructure failure of a target is retried on another board:
  // `swap` replaces `board` in lease `lease_id` with another board of its
  // type (LeaseService::swap) and calls `done` with the result and the
  // lease as it is then. Without it, nothing is retried.
  using SwapDone = std::function<void(const Status&, const lease::Lease&)>;
  using BoardSwapper = std::function<void(const std::string& lease_id, const std::string& board,
                                          const std::string& reason, SwapDone done)>;
  void setBoardSwapper(BoardSwapper swap);
  // Removes (off the event loop) the records and artifacts of runs that
  // ended more than runs.history_days ago; start-up does it too.
  void pruneOld();
  // Shutdown: running runs are cancelled (their records say so).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
