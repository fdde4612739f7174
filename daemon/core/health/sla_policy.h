// The tier SLA policy: which tier the agent serves (its effective tier),
// from its registered tier, the infrastructure failures of its boards, the
// runs and health checks that resolve them, and an operator's pin. It
// demotes one tier when an incident stays unresolved longer than the
// tier's resolution window or when the infrastructure-failure ratio of its
// runs goes above the tier's limit, promotes one tier after a healthy
// period (never above the registered tier), and says ahead of time when it
// will demote and what would prevent it. docs/sla.md is the reference.
//
// Pure: every input carries its time (unix ms); inputs are taken in time
// order (an earlier time than the last one seen counts as the last one).
// Decisions that fall due between inputs (an incident reaching its window,
// the healthy period ending, an old run leaving the ratio's window) are
// made at their exact time by advanceTo(), which every input calls first;
// the service also calls it at nextDecisionMs(). The same inputs in the
// same order give the same transitions, so a restart may rebuild the
// policy by replaying the stored inputs, or resume from a saved state().
// Thread safety: none; one thread (the event loop, or a test) uses it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/core/health/incidents.h"

namespace hwfarm::health {

// One tier's policy: config::TierPolicy's fields ([sla.tierN]), copied by
// the service (core does not include config/).
struct TierRule {
  double resolution_window_h = 24;
  double failure_ratio_max = 0.2;
  double ratio_window_h = 24;
  int64_t ratio_min_runs = 10;
  double promote_after_h = 24;
};

struct SlaOptions {
  int registered_tier = 1; // agent.tier
  // [sla.tier1..3], config's defaults.
  std::array<TierRule, 3> tiers{TierRule{24, 0.2, 24, 10, 24}, TierRule{72, 0.3, 72, 10, 24},
                                TierRule{168, 0.5, 168, 5, 24}};
  std::vector<BoardPlace> boards;           // the host's boards and their hubs
  int64_t correlation_window_ms = 3600'000; // failures this close merge into a hub or host incident (1 h: a board is seen at its next hourly check)
  int64_t ratio_max_runs = 0;               // the ratio's count window: the last N runs (0: time window only)
  size_t transitions_kept = 100;            // transitions state() keeps
};

// A run's outcome on one board, from best to worst. reference_failure: the
// board ran, but the run's reference simulator failed the lab's way (a
// simulator killed, a console cut): an infrastructure failure of the run,
// of no board.
enum class RunResult { passed, test_failure, reference_failure, infra_failure };

struct Transition {
  enum class Kind { demoted, promoted, pinned, unpinned };
  int64_t at_ms = 0;
  Kind kind = Kind::demoted;
  int from = 0; // demoted/promoted: the policy's tier; pinned/unpinned: the effective tier
  int to = 0;
  int effective = 0; // the effective tier after it
  // "demoted to tier 2 at 2026-12-01T03:12Z: infrastructure failure on
  // stm32-2 (flash timeout) unresolved for 24h"
  std::string reason;
};
const char* toString(Transition::Kind kind);

// A run the ratio counts.
struct RunSample {
  int64_t at_ms = 0;
  bool infra = false;
};

// What the policy knows, as plain data: saved by the store, handed back to
// SlaPolicy's constructor after a restart.
struct SlaState {
  int policy_tier = 1;            // 1..3, 4 = suspended (manual only)
  std::optional<int> pinned;      // operator's pin
  int64_t now_ms = 0;             // the time decisions were made up to
  int64_t last_transition_ms = 0; // of the policy tier
  int64_t healthy_since_ms = 0;   // no infrastructure failure and no open incident since
  // Since when the effective tier is what it is: its last change, or the
  // start of the agent's history (the time of the first advanceTo()). 0:
  // unknown (a state saved before it was kept).
  int64_t effective_since_ms = 0;
  std::string effective_reason;   // why the effective tier is what it is
  std::deque<RunSample> runs;     // within the longest ratio window
  std::vector<Incident> incidents;
  uint64_t next_incident_id = 1;
  std::deque<Transition> transitions; // newest last
};

struct IncidentStanding {
  Incident incident;
  int64_t age_ms = 0;
  int64_t window_ms = 0;     // the policy tier's resolution window
  int64_t demotes_at_ms = 0; // opened + window
};

struct RatioStanding {
  int64_t runs = 0;
  int64_t infra_failures = 0;
  double ratio = 0;
  double max = 0;
  int64_t min_runs = 0;
  int64_t window_ms = 0;
  int64_t from_ms = 0; // runs after this count (the window's start, or the last transition)
};

// The standing of the agent against its SLA, for GET /v1/sla and metrics.
struct Standing {
  int registered = 1;
  int effective = 1;
  int policy = 1;
  std::optional<int> pinned;
  int64_t since_ms = 0;
  std::string reason;
  std::vector<IncidentStanding> incidents; // oldest first
  RatioStanding ratio;
  std::optional<int64_t> ms_to_demotion;   // nullopt: no demotion ahead (none open, pinned, suspended)
  std::optional<int64_t> promotion_at_ms;  // when the healthy period ends, if it is running
  // "tier 1 → 2 in 3 h 12 m unless stm32-2 recovers"; "" when nothing is ahead.
  std::string warning;
};

class SlaPolicy {
 public:
  // REQUIRES: options.registered_tier in 1..3. Starts at the registered
  // tier, or resumes from `state`.
  explicit SlaPolicy(SlaOptions options, std::optional<SlaState> state = std::nullopt);

  // Makes every decision due up to `now_ms`, each at its exact time.
  std::vector<Transition> advanceTo(int64_t now_ms);

  // An infrastructure failure on `board` (on `hub`; "" takes the
  // configured one) that is not a run's (a board lost, a daemon-side I/O
  // error): opens or joins an incident.
  std::vector<Transition> onInfraFailure(int64_t at_ms, const std::string& board, const std::string& hub,
                                         const std::string& detail);
  // A run's outcome on `board`. Every run counts in the ratio; an
  // infrastructure failure also opens or joins an incident; a run without
  // one (passed, or failed by its own tests) resolves the board. A
  // reference_failure counts as an infrastructure failure in the ratio and
  // restarts the healthy period, opens no incident (no board could resolve
  // it) and resolves the board, which ran. `resolves` false: a run that
  // counts in the ratio but resolves nothing (a harness's published results).
  std::vector<Transition> onRun(int64_t at_ms, const std::string& board, const std::string& hub, RunResult result,
                                const std::string& detail = "", bool resolves = true);
  // A health check's result: a pass resolves the board, a failure opens
  // or joins an incident ("health check: <detail>").
  std::vector<Transition> onCheck(int64_t at_ms, const std::string& board, const std::string& hub, bool passed,
                                  const std::string& detail = "");

  // An operator pins the effective tier. invalid_argument when `tier` is
  // not in 1..3 or is above (numerically below) the registered tier.
  // Decisions due up to `at_ms` are made first and kept in transitions();
  // call advanceTo(at_ms) before to receive them.
  Result<Transition> pin(int64_t at_ms, int tier, const std::string& who, const std::string& reason);
  // Removes the pin; nullopt when there was none. Same note as pin().
  std::optional<Transition> unpin(int64_t at_ms, const std::string& who, const std::string& reason);

  int registeredTier() const { return options_.registered_tier; }
  int policyTier() const { return s_.policy_tier; }
  int effectiveTier() const { return s_.pinned.value_or(s_.policy_tier); }
  // Since when the effective tier is what it is (0: unknown), and why: the
  // text of a refused lease's 409.
  int64_t effectiveSinceMs() const { return s_.effective_since_ms; }
  const std::string& effectiveReason() const { return s_.effective_reason; }

  // When advanceTo() next has something to decide; nullopt: nothing until
  // the next input.
  std::optional<int64_t> nextDecisionMs() const;
  // The standing at `now_ms` (REQUIRES: advanceTo(now_ms) was called, so
  // nothing due is pending).
  Standing standing(int64_t now_ms) const;

  const IncidentBook& incidents() const { return book_; }
  const std::deque<Transition>& transitions() const { return s_.transitions; }
  // The state to save; SlaPolicy(options, state()) continues as this one.
  SlaState state() const;

 private:
  const TierRule& rule(int tier) const;
  int64_t windowMs(int tier) const;
  RatioStanding ratioAt(int64_t t) const;
  std::optional<int64_t> nextDecisionAfter(int64_t t) const;
  void decideAt(int64_t t, std::vector<Transition>& out);
  void transition(int64_t t, Transition::Kind kind, int to, const std::string& why, std::vector<Transition>& out);
  void record(Transition tr, std::vector<Transition>& out);
  void failure(int64_t at_ms, const std::string& board, const std::string& hub, const std::string& detail);
  void resolved(int64_t at_ms, const std::string& board);
  void prune(int64_t t);

  SlaOptions options_;
  SlaState s_;
  IncidentBook book_;
};

} // namespace hwfarm::health
