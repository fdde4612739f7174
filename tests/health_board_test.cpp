// Board health (daemon/core/health/board_health.h): checks and recovery
// ladders in, board state and next-check times out; quarantine with its
// backoff; the correlated incidents (incidents.h) and the texts of
// format.h. Pure, on times in milliseconds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/core/health/board_health.h"
#include "daemon/core/health/format.h"
#include "daemon/core/health/incidents.h"

using namespace hwfarm::health;
using hwfarm::lease::BoardState;

namespace {

constexpr int64_t kSec = 1000;
constexpr int64_t kMin = 60 * kSec;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t T0 = 1796083200000; // 2026-12-01T00:00Z

CheckRecord passed(int64_t start, int64_t end, Trigger trigger = Trigger::periodic) {
  return CheckRecord{start, end, trigger, {StepResult{Step::check, true, false, end - start, "banner seen"}}};
}

// A failed check and the whole ladder after it, every step but the checks
// working.
CheckRecord failedLadder(int64_t start, int64_t end, const std::string& why = "no banner") {
  return CheckRecord{start,
                     end,
                     Trigger::retry,
                     {StepResult{Step::check, false, false, 10 * kSec, why},
                      StepResult{Step::power_cycle, true, false, 3 * kSec, "cycled"},
                      StepResult{Step::port_reset, false, true, 0, "no uhubctl hub configured"},
                      StepResult{Step::reenumerate, true, false, 2 * kSec, "serial 0671FF seen"},
                      StepResult{Step::check, false, false, 10 * kSec, why}}};
}

// Runs one check on `h` that starts at `at` and takes 30 s.
std::optional<HealthChange> check(BoardHealth& h, int64_t at, bool ok, bool correlated = false) {
  h.onCheckStarted(at);
  return h.onCheckFinished(ok ? passed(at, at + 30 * kSec) : failedLadder(at, at + 30 * kSec), correlated);
}

// A healthy board at T0 + 30 s.
BoardHealth healthy(HealthOptions o = {}, const std::string& name = "stm32-1") {
  BoardHealth h(name, o);
  check(h, T0, true);
  return h;
}

} // namespace

TEST_CASE("board health: a new board is checked at once and is not granted before it passes") {
  BoardHealth h("stm32-1", HealthOptions{});
  CHECK(h.state().health == HealthState::unknown);
  CHECK(h.boardState() == BoardState::recovering);
  CHECK(*h.nextCheckMs() <= T0);
  CHECK(h.nextTrigger() == Trigger::first);
  h.onCheckStarted(T0);
  CHECK_FALSE(h.nextCheckMs());
  CHECK(h.boardState() == BoardState::recovering);
  auto change = h.onCheckFinished(passed(T0, T0 + 30 * kSec, Trigger::first));
  REQUIRE(change);
  CHECK(change->from == HealthState::unknown);
  CHECK(change->to == HealthState::healthy);
  CHECK(h.boardState() == BoardState::available);
  CHECK(*h.nextCheckMs() == T0 + 30 * kSec + kHour + h.jitterMs());
  CHECK(h.nextTrigger() == Trigger::periodic);
}

TEST_CASE("board health: K failed ladders quarantine the board which is retried with doubling backoff up to the cap") {
  BoardHealth h = healthy();
  int64_t t = T0 + kHour;
  // Ladders 1 and 2: failing, recovering, retried after retry_ms.
  for (int n = 1; n <= 2; ++n) {
    auto change = check(h, t, false);
    CHECK(h.state().health == HealthState::failing);
    CHECK(h.state().failed_ladders == n);
    CHECK(h.boardState() == BoardState::recovering);
    CHECK(*h.nextCheckMs() == t + 30 * kSec + kMin);
    CHECK(h.nextTrigger() == Trigger::retry);
    CHECK(h.state().reason == "failed recovery ladder " + std::to_string(n) + " of 3 (no banner)");
    CHECK(change.has_value() == (n == 1)); // healthy -> failing once
    t += 2 * kMin;
  }
  // Ladder 3: quarantined, first retry after 15 min.
  auto q = check(h, t, false);
  REQUIRE(q);
  CHECK(q->to == HealthState::quarantined);
  CHECK(q->reason == "quarantined after 3 failed recovery ladders (no banner), next retry in 15m");
  CHECK(h.boardState() == BoardState::quarantined);
  CHECK(*h.nextCheckMs() == t + 30 * kSec + 15 * kMin);
  // Each failed retry doubles the delay: 30m, 1h, 2h, ... capped at 24 h.
  const std::vector<int64_t> delays{30 * kMin, kHour, 2 * kHour, 4 * kHour, 8 * kHour, 16 * kHour, 24 * kHour,
                                    24 * kHour};
  for (int64_t d : delays) {
    t = *h.nextCheckMs();
    auto again = check(h, t, false);
    REQUIRE(again); // a failed retry is reported (its backoff changed)
    CHECK(again->to == HealthState::quarantined);
    CHECK(h.state().backoff_ms == d);
    CHECK(*h.nextCheckMs() == t + 30 * kSec + d);
  }
  // A pass returns it to available.
  t = *h.nextCheckMs();
  auto back = check(h, t, true);
  REQUIRE(back);
  CHECK(back->from == HealthState::quarantined);
  CHECK(back->to == HealthState::healthy);
  CHECK(h.boardState() == BoardState::available);
  CHECK(h.state().released_ms == t + 30 * kSec);
}

TEST_CASE("board health: a board that fails again after quarantine goes back at once with a doubled backoff") {
  HealthOptions o;
  BoardHealth h = healthy(o);
  int64_t t = T0 + kHour;
  for (int n = 0; n < 3; ++n, t += 2 * kMin) check(h, t, false);
  REQUIRE(h.state().backoff_ms == 15 * kMin);
  // Released by a passing retry, then one failed ladder: quarantined
  // again (not 1 of 3), with 30 min; the next round 60 min.
  for (int64_t expected : {30 * kMin, 60 * kMin}) {
    check(h, *h.nextCheckMs(), true);
    REQUIRE(h.boardState() == BoardState::available);
    t = h.state().last_check_ms + kHour;
    auto change = check(h, t, false);
    REQUIRE(change);
    CHECK(change->to == HealthState::quarantined);
    CHECK(h.state().backoff_ms == expected);
    CHECK(h.state().reason ==
          "quarantined again after leaving quarantine (no banner), next retry in " + formatSpan(expected));
  }
}

TEST_CASE("board health: after a clean probation the backoff is forgotten and failures count from one") {
  HealthOptions o;
  BoardHealth h = healthy(o);
  int64_t t = T0 + kHour;
  for (int n = 0; n < 3; ++n, t += 2 * kMin) check(h, t, false);
  check(h, *h.nextCheckMs(), true);
  const int64_t released = h.state().released_ms;
  // Hourly passes through the 24 h probation.
  for (t = released + kHour; t < released + o.probation_ms; t += kHour) check(h, t, true);
  check(h, released + o.probation_ms, true);
  CHECK(h.state().backoff_ms == 0);
  check(h, released + o.probation_ms + kHour, false);
  CHECK(h.state().health == HealthState::failing);
  CHECK(h.state().failed_ladders == 1);
}

TEST_CASE("board health: checks are due after a lease ends or an infrastructure failure or on request but never while leased") {
  BoardHealth h = healthy();
  const int64_t t = T0 + 10 * kMin;
  h.onLeased(t);
  CHECK(h.boardState() == BoardState::leased);
  CHECK_FALSE(h.nextCheckMs());
  h.onInfraFailure(t + kMin); // a run's flash timeout while leased
  h.onOperatorRequest(t + 2 * kMin);
  CHECK_FALSE(h.nextCheckMs()); // still leased
  h.onLeaseEnded(t + 5 * kMin);
  CHECK(h.boardState() == BoardState::recovering); // not granted before the check
  CHECK(*h.nextCheckMs() == t + kMin);            // due since the failure: now
  CHECK(h.nextTrigger() == Trigger::operator_request);
  check(h, t + 5 * kMin, true);
  CHECK(h.boardState() == BoardState::available);

  // A plain lease end asks for a check too.
  h.onLeased(t + 10 * kMin);
  h.onLeaseEnded(t + 20 * kMin);
  CHECK(*h.nextCheckMs() == t + 20 * kMin);
  CHECK(h.nextTrigger() == Trigger::lease_end);
  check(h, t + 20 * kMin, true);

  // A periodic check under way makes the board not grantable.
  h.onCheckStarted(*h.nextCheckMs());
  CHECK(h.boardState() == BoardState::recovering);
  CHECK_FALSE(h.nextCheckMs());
}

TEST_CASE("board health: an operator's check request runs at once in quarantine and in maintenance") {
  BoardHealth h = healthy();
  int64_t t = T0 + kHour;
  for (int n = 0; n < 3; ++n, t += 2 * kMin) check(h, t, false);
  REQUIRE(h.boardState() == BoardState::quarantined);
  h.onOperatorRequest(t);
  CHECK(*h.nextCheckMs() == t); // not t + backoff
  CHECK(h.nextTrigger() == Trigger::operator_request);

  h.onMaintenance(t + kMin, "replacing the cable");
  CHECK(h.boardState() == BoardState::maintenance);
  CHECK_FALSE(h.nextCheckMs()); // the pending request was dropped
  CHECK(h.state().reason == "maintenance: replacing the cable");
  h.onOperatorRequest(t + 2 * kMin);
  CHECK(*h.nextCheckMs() == t + 2 * kMin);
  h.onResume(t + 3 * kMin);
  CHECK(h.boardState() == BoardState::quarantined); // resume from maintenance: state kept, check due
  CHECK(*h.nextCheckMs() == t + 2 * kMin);
  check(h, t + 3 * kMin, false);
  h.onResume(t + 10 * kMin); // resume from quarantine: available, on probation
  CHECK(h.boardState() == BoardState::available);
  check(h, t + 20 * kMin, false);
  CHECK(h.boardState() == BoardState::quarantined);
}

TEST_CASE("board health: periodic checks are jittered by a fixed offset from the board name") {
  HealthOptions o;
  o.interval_ms = kHour;
  o.jitter = 0.1;
  std::vector<int64_t> offsets;
  for (const char* name : {"stm32-1", "stm32-2", "stm32-3", "nucleo-a", "qemu-0"}) {
    BoardHealth a(name, o), b(name, o);
    CHECK(a.jitterMs() == b.jitterMs());
    CHECK(a.jitterMs() >= -6 * kMin);
    CHECK(a.jitterMs() <= 6 * kMin);
    offsets.push_back(a.jitterMs());
  }
  std::sort(offsets.begin(), offsets.end());
  CHECK(std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end()); // boards are spread
  o.jitter = 0;
  CHECK(BoardHealth("stm32-1", o).jitterMs() == 0);
}

TEST_CASE("board health: the history keeps the last N checks with each ladder step") {
  HealthOptions o;
  o.history = 3;
  BoardHealth h("stm32-1", o);
  for (int n = 0; n < 5; ++n) check(h, T0 + n * kHour, n % 2 == 0);
  const auto& history = h.state().history;
  REQUIRE(history.size() == 3);
  CHECK(history[0].started_ms == T0 + 2 * kHour);
  CHECK(history[2].started_ms == T0 + 4 * kHour);
  CHECK(history[1].steps.size() == 5);
  CHECK(history[1].steps[2].skipped);
  CHECK_FALSE(history[1].passed());
  CHECK(history[1].evidence() == "no banner");
  CHECK(history[1].durationMs() == 30 * kSec);
  CHECK(history[2].passed());
  CHECK(history[2].evidence().empty());
}

TEST_CASE("board health: failures correlated with the hub or host do not count toward quarantine") {
  BoardHealth h = healthy();
  for (int n = 0; n < 5; ++n) check(h, T0 + kHour + n * 2 * kMin, false, true);
  CHECK(h.state().health == HealthState::failing);
  CHECK(h.state().failed_ladders == 0);
  CHECK(h.boardState() == BoardState::recovering);
  CHECK(h.state().reason == "failing with its hub or host (no banner), not counted toward quarantine");
}

TEST_CASE("board health: a saved state resumes the same decisions") {
  BoardHealth h = healthy();
  int64_t t = T0 + kHour;
  for (int n = 0; n < 4; ++n, t += 2 * kMin) check(h, t, false);
  BoardHealth resumed("stm32-1", h.options(), h.state());
  CHECK(resumed.boardState() == BoardState::quarantined);
  CHECK(resumed.nextCheckMs() == h.nextCheckMs());
  CHECK(resumed.state().backoff_ms == 30 * kMin);
  // A check under way when saved was lost: due again at once.
  h.onCheckStarted(t);
  BoardHealth crashed("stm32-1", h.options(), h.state());
  CHECK(*crashed.nextCheckMs() <= t);
  CHECK(crashed.boardState() == BoardState::quarantined);
}

TEST_CASE("incidents: failures of two boards of one hub within the window are one hub incident") {
  IncidentBook book({{"a", "1-1"}, {"b", "1-1"}, {"c", "1-2"}, {"d", "1-2"}}, 10 * kMin);
  book.onFailure(T0, "a", "", "flash timeout");
  const Incident& inc = book.onFailure(T0 + 5 * kMin, "b", "", "no banner");
  CHECK(inc.scope == Scope::hub);
  CHECK(inc.opened_ms == T0);
  CHECK(inc.describe() == "hub 1-1 (a, b: flash timeout)");
  REQUIRE(book.open().size() == 1);
  CHECK(book.correlated("a"));
  CHECK(book.correlated("b"));
  // Another hub's board stays apart; a repeated failure adds nothing.
  book.onFailure(T0 + 6 * kMin, "c", "", "board lost");
  book.onFailure(T0 + 7 * kMin, "a", "", "again");
  REQUIRE(book.open().size() == 2);
  CHECK_FALSE(book.correlated("c"));
  // The hub incident closes when both boards are resolved.
  CHECK_FALSE(book.onResolved("a"));
  auto closed = book.onResolved("b");
  REQUIRE(closed);
  CHECK(closed->boards == std::vector<std::string>{"a", "b"});
  CHECK(book.open().size() == 1);
  CHECK_FALSE(book.onResolved("b"));
}

TEST_CASE("incidents: failures farther apart than the window stay separate") {
  IncidentBook book({{"a", "1-1"}, {"b", "1-1"}}, 10 * kMin);
  book.onFailure(T0, "a", "", "flash timeout");
  book.onFailure(T0 + 10 * kMin + 1, "b", "", "flash timeout");
  REQUIRE(book.open().size() == 2);
  CHECK(book.open()[0].scope == Scope::board);
  CHECK(book.open()[1].describe() == "b (flash timeout)");
}

TEST_CASE("incidents: every board of the host failing within the window is one host incident") {
  IncidentBook book({{"a", "1-1"}, {"b", "1-2"}, {"c", ""}}, 10 * kMin);
  book.onFailure(T0, "a", "", "board lost");
  book.onFailure(T0 + kMin, "b", "", "board lost");
  CHECK(book.open().size() == 2); // two hubs: no hub incident yet
  const Incident& inc = book.onFailure(T0 + 2 * kMin, "c", "", "simulator crashed");
  CHECK(inc.scope == Scope::host);
  CHECK(inc.subject() == "the host");
  CHECK(inc.describe() == "the host (a, b, c: board lost)");
  CHECK(inc.opened_ms == T0);
  REQUIRE(book.open().size() == 1);
  // Restored from what open() and nextId() gave, it is the same book.
  IncidentBook again({{"a", "1-1"}, {"b", "1-2"}, {"c", ""}}, 10 * kMin);
  again.restore(book.open(), book.nextId());
  CHECK(again.incidentOf("b")->scope == Scope::host);
  CHECK(again.onFailure(T0 + kHour, "z", "9-9", "x").id == book.nextId());
}

TEST_CASE("format: UTC minutes and countdowns and spans and tier names") {
  CHECK(formatUtcMinute(T0 + 3 * kHour + 12 * kMin + 59 * kSec) == "2026-12-01T03:12Z");
  CHECK(formatUtcMinute(0) == "1970-01-01T00:00Z");
  CHECK(formatUtcMinute(1835481540000) == "2028-02-29T23:59Z");
  CHECK(formatUtcMinute(-kMin) == "1969-12-31T23:59Z");
  CHECK(formatCountdown(3 * kHour + 12 * kMin + 59 * kSec) == "3 h 12 m");
  CHECK(formatCountdown(26 * kHour) == "26 h 0 m");
  CHECK(formatCountdown(45 * kMin) == "45 m");
  CHECK(formatCountdown(59 * kSec + 999) == "59 s");
  CHECK(formatCountdown(-5) == "0 s");
  CHECK(formatSpan(24 * kHour) == "24h");
  CHECK(formatSpan(90 * kMin) == "1h30m");
  CHECK(formatSpan(45 * kMin) == "45m");
  CHECK(formatSpan(20 * kSec) == "20s");
  CHECK(tierName(2) == "tier 2");
  CHECK(tierName(4) == "suspended");
}
