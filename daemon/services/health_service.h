// The health service: runs each board's health checks and recovery ladder
// (health_checks.h: check, power cycle, re-enumeration) when the pure
// policy (core/health/board_health.h) says one is due, and applies the
// result through the lease service: a board that passes becomes available,
// one that fails stays recovering and is retried, and after
// health.quarantine_after failed ladders in a row it is quarantined, then
// retried with a doubling backoff until it passes (docs/sla.md "Board
// health").
//
// When checks run: a board entering recovering (an expired or revoked
// lease, a board that appeared, a resumed one) after leases.recovery_s; a
// board's lease ended after an infrastructure failure on it; every
// health.interval_s (jittered per board) for an available board, taken out
// of the pool for the check; on an operator's request. Never on a leased
// board; a board between check and lease is not granted (it is recovering).
//
// The recovery ladder: check; if it fails, power-cycle, (port reset: the
// power cycle of a uhubctl switch is one), wait for the board to be present
// again, check again. Every step's result is kept in the board's history.
//
// State kept: in memory (the history, counts and backoff) and, for the
// board's state, in the lease service's database (quarantined survives a
// restart, and its retries then start at health.backoff_s). Every check,
// change of health and operator's request is an event in the database's
// event log (health_check, health_state, health_check_requested).
//
// Thread safety: every call on the event loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/clock.h"
#include "daemon/core/health/board_health.h"
#include "daemon/core/lease/types.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm {

class BoardService;
class LeaseService;
class TargetRunner;

class HealthService {
 public:
  // Takes over the lease service's recovery of boards (setRecoveryHandler).
  // Checks boot the boards through `targets`, as runs do.
  HealthService(boost::asio::io_context& io, const config::FleetConfig& config, BoardService& boards,
                TargetRunner& targets, LeaseService& leases, const Clock& clock);
  ~HealthService();

  void reconfigure(const config::FleetConfig& config);
  // No more checks start; one under way is not applied.
  void stop();

  // A lease ended: its boards are no longer leased; an expired or revoked
  // one's (or one with an infrastructure failure during the lease) are
  // checked.
  void leaseEnded(const lease::Lease& lease);
  // An infrastructure failure on `board` (a run's): it is checked once free.
  void infrastructureFailure(const std::string& board);
  // Operator `by` asked for a check now (recorded as an event): not_found,
  // or conflict while the board is leased (the check would touch it),
  // offline, or a check is under way.
  Status requestCheck(const std::string& board, const std::string& by);

  // The board's health (nullptr: not configured).
  const health::BoardHealth* board(const std::string& name) const;
  // When the board's next check is due (unix ms), if one is.
  std::optional<int64_t> nextCheckMs(const std::string& name) const;

  // Runs when each check ends, with its board and record, before its
  // result is judged (the SLA records it; tests).
  void onChecked(std::function<void(const std::string& board, const health::CheckRecord&)> hook);
  // Whether `board`'s failure is part of a correlated incident (its hub's,
  // the host's): then it does not count toward the board's quarantine.
  void setCorrelation(std::function<bool(const std::string& board)> correlated);

  // Fires what is due at the clock's time now (checks, a check's banner
  // wait): a test on a ManualClock calls it; the event loop does otherwise.
  void tick();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hwfarm
