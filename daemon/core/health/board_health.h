// The health of one board: a state machine fed with the results of health
// checks (each a recovery ladder: check, power-cycle, USB port reset,
// re-enumeration, check again) and with what happens to the board (leased,
// lease ended, infrastructure failure, operator request, maintenance). It
// answers which state the board should be in (available, recovering,
// quarantined, ...) and when its next check is due. docs/sla.md "Board
// health" is the reference.
//
// Pure: times are arguments (unix ms, nondecreasing; an earlier time than
// the last one seen is taken as the last one). The health service runs the
// checks and feeds the results in; the lease service applies boardState().
// Thread safety: none; one thread (the event loop, or a test) uses it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/lease/types.h"

namespace hwfarm::health {

// Knobs of the board health policy. interval_ms comes from the board's
// `health.interval_s`; the others have no config key yet (docs/sla.md
// "Defaults").
struct HealthOptions {
  int64_t interval_ms = 3600'000;       // health.interval_s: between periodic checks
  double jitter = 0.1;                  // periodic checks move by up to ±10% of the interval, fixed per board name
  int quarantine_after = 3;             // K: consecutive failed ladders before quarantine
  int64_t retry_ms = 60'000;            // after a failed ladder, before quarantine
  int64_t backoff_initial_ms = 900'000; // first retry delay in quarantine (15 min)
  int64_t backoff_max_ms = 86'400'000;  // cap of the doubling (24 h)
  int64_t probation_ms = 86'400'000;    // clean for this long after leaving quarantine: backoff forgotten
  size_t history = 20;                  // checks kept per board (N)
};

// One step of a recovery ladder, in the order the service runs them.
enum class Step { check, power_cycle, port_reset, reenumerate };
const char* toString(Step step);

struct StepResult {
  Step step = Step::check;
  bool ok = false;
  bool skipped = false; // not configured (no power driver, no uhubctl hub)
  int64_t duration_ms = 0;
  std::string detail;   // failure evidence, or what was done
};

// Why a check runs.
enum class Trigger { first, periodic, lease_end, infra_failure, operator_request, resume, retry };
const char* toString(Trigger trigger);

// One health check: the first check and, when it failed, the recovery
// ladder's steps, each with its result.
struct CheckRecord {
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  Trigger trigger = Trigger::periodic;
  std::vector<StepResult> steps;

  // Passed when its last step is a check that passed (the service stops
  // the ladder at the first passing check).
  bool passed() const;
  // The detail of the last failed step ("" when passed).
  std::string evidence() const;
  int64_t durationMs() const { return ended_ms - started_ms; }
};

// unknown: not checked since it appeared (or since a restart without a
// snapshot); failing: 1..K-1 consecutive failed ladders.
enum class HealthState { unknown, healthy, failing, quarantined };
const char* toString(HealthState state);

// Everything a BoardHealth knows: plain data, so the store can keep it and
// a restart can resume from it (BoardHealth(name, options, state)).
struct BoardHealthState {
  HealthState health = HealthState::unknown;
  int failed_ladders = 0;  // consecutive, counted toward quarantine
  int64_t backoff_ms = 0;  // quarantine's retry delay; kept after release until probation ends
  int64_t last_check_ms = 0;   // end of the last check
  int64_t quarantined_ms = 0;  // when it last entered quarantine
  int64_t released_ms = 0;     // when it last left quarantine
  int64_t last_event_ms = 0;   // latest time seen
  bool leased = false;
  bool maintenance = false;
  bool running = false;        // a check is under way
  std::optional<Trigger> pending; // a check asked for
  int64_t pending_ms = 0;
  std::string reason;             // why it is in its state, for board show
  std::deque<CheckRecord> history; // newest last, at most options.history
};

// A change of health state, for the events and logs.
struct HealthChange {
  HealthState from = HealthState::unknown;
  HealthState to = HealthState::unknown;
  std::string reason;
};

class BoardHealth {
 public:
  BoardHealth(std::string board, HealthOptions options, BoardHealthState state = {});

  // The board was granted: no check runs until the lease ends.
  void onLeased(int64_t now_ms);
  // The lease ended (released, expired or revoked): a check is due now.
  void onLeaseEnded(int64_t now_ms);
  // An infrastructure failure on the board (a run's, or a lost board): a
  // check is due now, or when the lease ends.
  void onInfraFailure(int64_t now_ms);
  // The board's lease ended and it went back to the pool as it was (a
  // clean release): no check of its own, but one asked for meanwhile (an
  // infrastructure failure during the lease) is due now.
  void onReleased(int64_t now_ms);
  // A check is due now, for `trigger` (the service's reason: the board
  // entered recovering, appeared, ...).
  void requestCheck(int64_t now_ms, Trigger trigger);
  // An operator asked for a check (`hwfarmctl board check`): due now, even
  // in quarantine or maintenance; never while leased.
  void onOperatorRequest(int64_t now_ms);
  // `board maintenance`: no checks (but an operator's), state maintenance.
  void onMaintenance(int64_t now_ms, std::string reason);
  // `board resume`: out of maintenance (a check is due now, the board is
  // recovering until it passes), or out of quarantine (available at once,
  // on probation like a board whose retry passed).
  void onResume(int64_t now_ms);

  // The service starts a check: the board is recovering until it ends.
  void onCheckStarted(int64_t now_ms);
  // A check ended. `correlated`: its failure is part of an incident on the
  // board's hub or host (IncidentBook), so it does not count toward the
  // board's own quarantine. Returns the change of state, if any.
  std::optional<HealthChange> onCheckFinished(CheckRecord record, bool correlated = false);

  // When the next check is due (a time <= now means now); nullopt while
  // leased, while a check runs, and in maintenance unless an operator
  // asked. Periodic: last check + interval + jitterMs(); after a failed
  // ladder: + retry_ms; in quarantine: + backoff_ms.
  std::optional<int64_t> nextCheckMs() const;
  // Why the next check runs (meaningful when nextCheckMs() has a value).
  Trigger nextTrigger() const;

  // The state the lease service should give the board: leased, maintenance,
  // quarantined, available (healthy and no check pending or running) or
  // recovering. Presence (offline) is the service's.
  lease::BoardState boardState() const;

  // The fixed offset of this board's periodic checks, in
  // [-jitter * interval, +jitter * interval], from a hash of its name.
  int64_t jitterMs() const { return jitter_ms_; }

  const std::string& board() const { return board_; }
  const BoardHealthState& state() const { return s_; }
  const HealthOptions& options() const { return options_; }

 private:
  int64_t seen(int64_t now_ms);
  void request(Trigger trigger, int64_t now_ms);
  void forgiveAfterProbation(int64_t now_ms);

  std::string board_;
  HealthOptions options_;
  BoardHealthState s_;
  int64_t jitter_ms_ = 0;
};

} // namespace hwfarm::health
