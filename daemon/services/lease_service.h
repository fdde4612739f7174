// The lease service: the pure scheduler, made durable by the store and driven
// by the event loop (expiry, wait deadlines, recovery). Every answer that
// reports a state change is given only after that change is committed.
//
// Time comes only from the Clock it is given. The scheduler's times (grants,
// expiries, arrivals, events: unix ms) are the wall clock read once when the
// service starts, advanced by the clock's steady time since. So every
// deadline (a lease's expiry, a request's wait, a board's recovery, aging)
// runs on steady time: a step of the wall clock while hwfarmd runs makes no
// lease expire early or late. The times shown and stored then differ from
// the system's wall clock by that step until the next start, which restores
// the stored expiries against the wall clock (the only time a restart keeps).
//
// Deadlines fire from tick(). The service arms one event-loop timer for the
// next deadline, which calls tick(); a test on a ManualClock advances the
// clock and calls tick() itself.
//
// Thread safety: all calls on the event loop thread.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease/scheduler.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

namespace store {
class Database;
}

// The daemon's database under the config's state dir (leases.fsync), not
// started; and starting it with its completions on `io`.
std::unique_ptr<store::Database> openDatabase(const config::FleetConfig& config);
void startDatabase(store::Database& db, boost::asio::io_context& io);

// The answer to an acquire. Not an error when granted (status ok, lease
// set; `existing` for a retry answered with the lease it was granted
// before). Otherwise the status says why, with its message: timeout (no
// matching board within wait_ms; `position` is the place the request had),
// invalid_argument (no configured boards can ever match), busy (the queue
// is full), unavailable (hwfarmd is stopping).
struct AcquireOutcome {
  Status status;
  bool existing = false;
  lease::Lease lease;
  size_t position = 0;
};

struct LeaseMetrics {
  uint64_t grants = 0, releases = 0, expiries = 0, revocations = 0, wait_timeouts = 0;
  // Wait time of granted requests (seconds), cumulative Prometheus buckets.
  static constexpr std::array<double, 12> kBuckets{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800};
  std::array<uint64_t, kBuckets.size()> wait_buckets{};
  uint64_t wait_count = 0;
  double wait_sum_s = 0;
};

class LeaseService {
 public:
  // Opens the database under the config's state dir and restores state:
  // active leases keep holder, id and expiry; leases that expired while the
  // daemon was down are expired now. Throws std::runtime_error on failure.
  // `clock` must outlive the service.
  LeaseService(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock);
  // The same on the daemon's database `db` (its other services keep their
  // tables there too): the service adds its tables and restores from it;
  // the caller starts it (startDatabase) once every service has, and
  // destroys it before the services.
  LeaseService(boost::asio::io_context& io, const config::FleetConfig& config, const Clock& clock,
               store::Database& db);
  ~LeaseService();

  // Applies a reloaded config: new boards, removed boards (their leases are
  // revoked with a reason), new limits.
  void reconfigure(const config::FleetConfig& config);
  // Answers every waiting request with unavailable (shutting down) and
  // stops every timer.
  void stop();

  // Fires every deadline due at the clock's steady time now: lease expiries,
  // wait deadlines, recoveries, the forgetting of old ended leases. Then
  // arms the event-loop timer for the next one. Does nothing after stop().
  void tick();

  using AcquireDone = std::function<void(const AcquireOutcome&)>;
  // Grants now, or waits up to wait_ms. `cancel` receives a function the
  // caller runs if its client goes away while waiting.
  void acquire(lease::LeaseRequest request, int64_t wait_ms, AcquireDone done,
               const std::function<void(std::function<void()>)>& on_cancel);
  using OpDone = std::function<void(const lease::OpResult&)>;
  void renew(const std::string& id, int64_t ttl_ms, OpDone done);
  void release(const std::string& id, OpDone done);
  void revoke(const std::string& id, const std::string& reason, OpDone done);
  void maintenance(const std::string& board, const std::string& reason, OpDone done);
  // A board's device appeared (offline -> recovering) or vanished (-> offline;
  // a lease holding it sees the board lost: an infrastructure failure).
  void presence(const std::string& board, bool present);
  void resume(const std::string& board, OpDone done);
  // Health checks (health_service.h). With a recovery handler, a board
  // that has spent leases.recovery_s in recovering is handed to it (to be
  // checked) instead of becoming available. beginCheck takes an available
  // board out of the pool for a check; checked() applies a check's result
  // (Scheduler::beginCheck, checked), durably.
  void setRecoveryHandler(std::function<void(const std::string& board)> handler);
  void beginCheck(const std::string& board, OpDone done);
  void checked(const std::string& board, lease::BoardState to, const std::string& reason, OpDone done);
  // Replaces `board` of the active lease `id` with another available board
  // of its type (Scheduler::swap), durably: the retry of an infrastructure
  // failure. The answer's lease holds the new board.
  void swap(const std::string& id, const std::string& board, const std::string& reason, OpDone done);
  // Records, durably, an infrastructure failure of `board` (empty: of the
  // lab, not of one board) during `lease_id`: an "infra_failure" event, for
  // the tier SLA.
  void recordInfrastructureFailure(const std::string& lease_id, const std::string& board, const std::string& detail);
  // Records, durably, an event of another service in the same log (the
  // health service's checks and state changes).
  void recordEvent(const std::string& kind, const std::string& lease_id, const std::string& board,
                   const std::string& detail);

  // Runs for every lease that ends (released, expired, revoked), after the
  // end is durable.
  // Runs `fn` once every change made so far is committed (at once if none
  // is pending): for answers that report state without changing it.
  void whenCommitted(std::function<void()> fn);
  void onLeaseEnded(std::function<void(const lease::Lease&)> hook);
  // Runs for every "infra_failure" event (a run's, or a board lost while
  // leased) once it is durable: the tier SLA's input.
  void onInfrastructureFailureRecorded(std::function<void(const lease::Event&)> hook);

  const lease::Scheduler& scheduler() const;
  const LeaseMetrics& metrics() const;
  // The scheduler's time now (see above): unix ms that never jump.
  int64_t nowMs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
