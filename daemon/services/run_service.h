// The run service: runs test images on a lease's boards and on simulators
// (docs/runs.md). Each run is a pure plan (core/run/plan.h) that decides
// everything; this service feeds it what happened and carries out what it
// says: boards and simulators through the target runner (target_runner.h),
// deadlines on the Clock, board swaps through the lease service, files
// through the run directory (run_dir.h), records into the database.
//
// A run is a durable record: it is stored before it starts (the start is
// answered then) and again, final, after its artifacts are written; one
// hwfarmd finds "running" at start-up (killed mid-run) becomes interrupted
// (run_history.h).
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
#include "daemon/core/run/record.h"
#include "daemon/core/run/spec.h"
#include "daemon/services/run_dir.h"
#include "daemon/services/run_events.h"
#include "daemon/services/run_history.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

namespace store {
class Database;
}
class LeaseService;
class TargetRunner;

struct RunMetrics {
  std::map<std::string, uint64_t> ended; // runs ended, by state name
  uint64_t attempts = 0;                 // image-on-target attempts judged
  uint64_t infrastructure_failures = 0;  // attempts failed the lab's way
  uint64_t test_failures = 0;            // attempts failed the firmware's way
};

class RunService {
 public:
  // Keeps its records in `db` (the daemon's database: it adds its tables;
  // REQUIRES: not started yet) and restores them. Retries swap boards
  // through `leases`. Every reference must outlive the service.
  RunService(boost::asio::io_context& io, const config::FleetConfig& config, TargetRunner& targets,
             LeaseService& leases, const Clock& clock, store::Database& db);
  ~RunService();

  void reconfigure(const config::FleetConfig& config);

  // Starts a run on `lease`'s boards. Refused at once (`done` is not
  // called): Code::invalid_argument saying what is wrong with `spec` (no
  // image, a target not in the lease, no reference simulator for a board
  // type), Code::busy (runs.max_runs). Otherwise `done` gets the run's id
  // once its record is stored (the run then starts), or the store's error.
  using StartDone = std::function<void(const Result<std::string>&)>;
  Status start(const lease::Lease& lease, run::Spec spec, StartDone done);
  // A test harness's results published on `lease` (docs/harness-results.md):
  // `archive` is the request's tar file (spooled; removed once read), of
  // results/ files (JUnit XML, twister.json) and artifacts/ files. Refused at
  // once (`done` not called): no_space (the disk, or the lease's artifact
  // share), invalid_argument (a board not in the lease). Otherwise, off the
  // event loop, the archive is read twice (checked and parsed, then its
  // files written, each durable); `done` gets the run's record once it is
  // stored and listed, or invalid_argument naming the file, line and column
  // (nothing stored), or the disk's error. The run ends as it is made: its
  // hooks run then (uploads, the SLA).
  struct Publish {
    std::string name;   // the run's name, e.g. "pytest"
    std::string commit; // or ""
    std::string board;  // the board the harness ran on, or "": the lease's one board, if it has one
    std::string archive;
  };
  using PublishDone = std::function<void(const Result<run::Record>&)>;
  Status publish(const lease::Lease& lease, Publish publish, PublishDone done);
  // Cancels a running run: its boards are powered off, its simulators
  // stopped, its record says why and `cancelling` (it ends cancelled,
  // whatever comes meanwhile); ok for a run being cancelled already.
  // Code::not_found, or conflict when it has ended already: its verdict was
  // decided before the cancel (its files may still be being written; the
  // message names the state it ends in).
  Status cancel(const std::string& id, const std::string& reason);
  // The lease ended: its runs are cancelled.
  void leaseEnded(const lease::Lease& lease);

  // The record of a running run, or of an ended one still in memory (the
  // last few that ended or were read: run_history.h); else nullptr.
  const run::Record* find(const std::string& id) const;
  // Run `id`'s record to `done`: at once when it is in memory, else once
  // read from the database; nullptr when there is no run `id` (or its
  // stored record is not readable). `done` runs on the event loop.
  void record(const std::string& id, std::function<void(const run::Record*)> done);
  // There is a run `id` (running, or ended and listed); for one older
  // than the runs listed, record() says.
  bool known(const std::string& id) const;
  std::optional<RunListing> listing(const std::string& id) const;
  size_t runningCount() const;
  const RunMetrics& metrics() const;
  // Every run listed, newest first.
  std::vector<RunListing> list() const;
  // The runs' directories: their artifacts.
  const RunDir& dir() const;
  // Follows run `id`'s progress: `on_event` gets its record as the first
  // line, then a line per change, and last (last = true) the end line once
  // the run's artifacts are written (run_events.h). An ended run's two
  // lines come once its record is read (before watch() returns when it is
  // in memory). Returns the unwatch (callable any
  // time, also after the end line). A run neither running nor listed is
  // read from its row (one older than those listed, which record() found):
  // without a row its end line says its record is gone.
  std::function<void()> watch(const std::string& id, RunEventSink on_event);
  size_t watcherCount(const std::string& id) const;
  // The runs hwfarmd found running at start-up, now interrupted (ended
  // then, without their hooks): taken once, for their uploads.
  std::vector<run::Record> interruptedAtStart();
  // Runs when a run ends, after its artifacts are written (every hook
  // given, in order).
  void onRunEnded(std::function<void(const run::Record&)> hook);
  // Runs for each attempt of an ended run that failed the lab's way: its
  // lease, its board (empty for a simulator) and why.
  using InfraHook = std::function<void(const std::string& lease_id, const std::string& board, const std::string& why)>;
  void onInfrastructureFailure(InfraHook hook);
  // Removes (off the event loop) the records and artifacts of runs that
  // ended more than runs.history_days ago; start-up does it too.
  void pruneOld();
  // Shutdown: running runs are cancelled (their records say so).
  void stop();
  // Fires the deadlines due on a ManualClock (tests); the loop does it
  // otherwise.
  void tick();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
