// The tier SLA policy (daemon/core/health/sla_policy.h) in a simulation:
// two weeks of runs and health checks on four boards, on a ManualClock in
// milliseconds, with infrastructure failures injected on a schedule. Every
// test asserts the exact demotion and promotion times and reasons; the
// comments derive each expected time from the schedule.
//
// The schedule (times of day, every day, from 2026-12-01T00:00Z):
//   runs    every 30 min (:00 and :30); slot k goes to board k % 4
//           (stm32-1 at even hours :00, stm32-2 even :30, stm32-3 odd :00,
//           stm32-4 odd :30), or to the next board without an open incident
//           (the lease service does not grant a broken board)
//   checks  hourly per board: stm32-1 at :05, stm32-2 :15, stm32-3 :25,
//           stm32-4 :35
//   hubs    stm32-1 and stm32-2 on hub 1-1, stm32-3 and stm32-4 on 1-2
// A broken board fails its runs ("flash timeout") and its checks ("no
// banner") while broken; a run-only fault fails runs but passes checks.
#include <catch2/catch.hpp>

#include <chrono>
#include <tuple>
#include <string>
#include <vector>

#include "daemon/core/clock.h"
#include "daemon/core/health/format.h"
#include "daemon/core/health/sla_policy.h"

using namespace hwfarm::health;
using hwfarm::ManualClock;

namespace {

constexpr int64_t kMin = 60'000;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t T0 = 1796083200000; // 2026-12-01T00:00Z

const std::vector<BoardPlace> kBoards{{"stm32-1", "1-1"}, {"stm32-2", "1-1"}, {"stm32-3", "1-2"}, {"stm32-4", "1-2"}};

struct Fault {
  std::string board;
  int64_t from; // offset from T0
  int64_t to;
  bool runs_only = false; // checks pass (a flaky cable under load)
};

SlaOptions options(int registered = 1) {
  SlaOptions o;
  o.registered_tier = registered;
  o.boards = kBoards;
  return o;
}

class Sim {
 public:
  explicit Sim(SlaOptions o = options()) : policy(std::move(o)), clock(T0) {}

  SlaPolicy policy;
  ManualClock clock;
  std::vector<Fault> faults;
  bool test_failures = false; // every run fails its own tests
  // While in one of these (offsets from T0), every run's reference
  // simulator fails the lab's way: the boards run well.
  std::vector<std::pair<int64_t, int64_t>> reference_down;
  std::vector<Transition> transitions;
  // Every input given to the policy, in order (the event log a restart replays).
  struct Input {
    bool is_check;
    int64_t at_ms;
    std::string board;
    RunResult result;
    bool passed;
  };
  std::vector<Input> log;

  // Plays the schedule up to T0 + `until` (inclusive), in 5-minute ticks.
  void runUntil(int64_t until) {
    while (clock.wallMs() + 5 * kMin <= T0 + until) {
      clock.advance(std::chrono::minutes(5));
      tick(clock.wallMs());
    }
    keep(policy.advanceTo(T0 + until));
  }

  void keep(const std::vector<Transition>& ts) { transitions.insert(transitions.end(), ts.begin(), ts.end()); }

  Standing standingAt(int64_t offset) {
    runUntil(offset);
    return policy.standing(T0 + offset);
  }

 private:
  bool broken(const std::string& board, int64_t t, bool for_check) const {
    for (const auto& f : faults)
      if (f.board == board && t >= T0 + f.from && t < T0 + f.to && !(for_check && f.runs_only)) return true;
    return false;
  }

  bool referenceDown(int64_t t) const {
    for (const auto& [from, to] : reference_down)
      if (t >= T0 + from && t < T0 + to) return true;
    return false;
  }
  void tick(int64_t t) {
    const int64_t in_hour = (t - T0) % kHour;
    if (in_hour % (30 * kMin) == 0) run(t);
    for (size_t i = 0; i < kBoards.size(); ++i)
      if (in_hour == static_cast<int64_t>(5 + 10 * i) * kMin) {
        const auto& b = kBoards[i].board;
        log.push_back({true, t, b, RunResult::passed, !broken(b, t, true)});
        keep(policy.onCheck(t, b, "", !broken(b, t, true), "no banner"));
      }
  }

  void run(int64_t t) {
    const size_t slot = static_cast<size_t>((t - T0) / (30 * kMin));
    for (size_t n = 0; n < kBoards.size(); ++n) {
      const auto& b = kBoards[(slot + n) % kBoards.size()].board;
      if (policy.incidents().incidentOf(b)) continue;
      const RunResult r = broken(b, t, false)   ? RunResult::infra_failure
                          : referenceDown(t)    ? RunResult::reference_failure
                          : test_failures       ? RunResult::test_failure
                                                : RunResult::passed;
      log.push_back({false, t, b, r, false});
      keep(policy.onRun(t, b, "", r, "flash timeout"));
      return;
    }
  }
};

} // namespace

TEST_CASE("sla sim: a single infrastructure failure resolved within the window demotes nothing") {
  Sim sim;
  // Given stm32-2 broken from day 1 00:20 to 06:00: its run at 00:30 fails
  // (the incident opens), its checks fail until 06:15 resolves it.
  sim.faults = {{"stm32-2", kDay + 20 * kMin, kDay + 6 * kHour}};
  Standing open = sim.standingAt(kDay + 3 * kHour);
  REQUIRE(open.incidents.size() == 1);
  CHECK(open.incidents[0].incident.opened_ms == T0 + kDay + 30 * kMin);
  CHECK(open.incidents[0].incident.detail == "flash timeout");
  CHECK(open.incidents[0].age_ms == 2 * kHour + 30 * kMin);
  CHECK(open.incidents[0].window_ms == 24 * kHour);
  CHECK(*open.ms_to_demotion == 21 * kHour + 30 * kMin);
  CHECK(sim.standingAt(kDay + 6 * kHour + 14 * kMin).incidents.size() == 1);
  CHECK(sim.standingAt(kDay + 6 * kHour + 15 * kMin).incidents.empty());
  sim.runUntil(14 * kDay);
  CHECK(sim.transitions.empty());
  CHECK(sim.policy.effectiveTier() == 1);
  CHECK_FALSE(sim.policy.standing(T0 + 14 * kDay).ms_to_demotion);
}

TEST_CASE("sla sim: a failure left unresolved demotes at exactly the window and the warning counts down") {
  Sim sim;
  // Given stm32-2 broken from day 2 00:20 to day 5: the incident opens at
  // day 2 00:30 (its run) and tier 1's window (24 h) ends at day 3 00:30.
  sim.faults = {{"stm32-2", 2 * kDay + 20 * kMin, 5 * kDay}};
  const int64_t opened = 2 * kDay + 30 * kMin;

  Standing s = sim.standingAt(opened);
  CHECK(*s.ms_to_demotion == 24 * kHour);
  CHECK(s.warning == "tier 1 → 2 in 24 h 0 m unless stm32-2 recovers");
  s = sim.standingAt(opened + 20 * kHour + 48 * kMin);
  CHECK(*s.ms_to_demotion == 3 * kHour + 12 * kMin);
  CHECK(s.warning == "tier 1 → 2 in 3 h 12 m unless stm32-2 recovers");
  s = sim.standingAt(opened + 23 * kHour + 55 * kMin);
  CHECK(s.warning == "tier 1 → 2 in 5 m unless stm32-2 recovers");
  REQUIRE(sim.transitions.empty());

  // One millisecond before the window ends: still tier 1.
  sim.runUntil(opened + 24 * kHour - 1);
  CHECK(sim.transitions.empty());
  CHECK(*sim.policy.standing(T0 + opened + 24 * kHour - 1).ms_to_demotion == 1);
  CHECK(sim.policy.standing(T0 + opened + 24 * kHour - 1).warning == "tier 1 → 2 in 0 s unless stm32-2 recovers");
  sim.runUntil(opened + 24 * kHour);
  REQUIRE(sim.transitions.size() == 1);
  const Transition& d = sim.transitions[0];
  CHECK(d.at_ms == T0 + opened + 24 * kHour);
  CHECK(d.kind == Transition::Kind::demoted);
  CHECK(d.from == 1);
  CHECK(d.to == 2);
  CHECK(d.reason ==
        "demoted to tier 2 at 2026-12-04T00:30Z: infrastructure failure on stm32-2 (flash timeout) unresolved for 24h");
  CHECK(sim.policy.effectiveReason() == d.reason);
  CHECK(sim.policy.effectiveSinceMs() == d.at_ms);

  // At tier 2 the window is 72 h from the same failure: 48 h left.
  s = sim.policy.standing(T0 + opened + 24 * kHour);
  CHECK(s.warning == "tier 2 → 3 in 48 h 0 m unless stm32-2 recovers");
  // Fixed at day 5: stm32-2's check at day 5 00:15 resolves it (47 h 45 m
  // after the failure, inside tier 2's 72 h), so no second demotion; 24 h
  // healthy later, day 6 00:15, it is promoted back.
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[1].at_ms == T0 + 6 * kDay + 15 * kMin);
  CHECK(sim.transitions[1].kind == Transition::Kind::promoted);
  CHECK(sim.transitions[1].reason == "promoted to tier 1 at 2026-12-07T00:15Z: healthy for 24h "
                                     "(no infrastructure failure, every board's checks green)");
}

TEST_CASE("sla sim: a burst of infrastructure failures above the ratio demotes once") {
  Sim sim;
  // Given every run failing from day 3 00:00 to 06:00 while the checks
  // pass (each board is resolved by its check minutes after its failed
  // run, so every slot still runs): 48 runs in any 24 h, failures at 00:00,
  // 00:30, ... The 10th, at 04:30, makes 10 of 48 (20.8%) > 20%.
  for (const auto& b : kBoards) sim.faults.push_back({b.board, 3 * kDay, 3 * kDay + 6 * kHour, true});
  Standing s = sim.standingAt(3 * kDay + 4 * kHour);
  CHECK(s.ratio.runs == 48);
  CHECK(s.ratio.infra_failures == 9);
  CHECK(s.ratio.window_ms == 24 * kHour);
  CHECK(sim.transitions.empty());
  sim.runUntil(3 * kDay + 4 * kHour + 30 * kMin);
  REQUIRE(sim.transitions.size() == 1);
  CHECK(sim.transitions[0].at_ms == T0 + 3 * kDay + 4 * kHour + 30 * kMin);
  CHECK(sim.transitions[0].reason == "demoted to tier 2 at 2026-12-04T04:30Z: infrastructure failures in 10 of 48 "
                                     "runs (21%) over 24h, above 20%");
  // Two more failures (05:00, 05:30) count from the transition on: 2 of
  // the next 10 runs (20%) stay under tier 2's 30%. The last failure
  // (stm32-4 at 05:30) is resolved by its check at 05:35; promotion 24 h
  // later, day 4 05:35.
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[1].at_ms == T0 + 4 * kDay + 5 * kHour + 35 * kMin);
  CHECK(sim.transitions[1].kind == Transition::Kind::promoted);
  CHECK(sim.transitions[1].to == 1);
}

TEST_CASE("sla sim: a reference simulator failing the lab's way counts in the ratio and opens no incident") {
  Sim sim;
  // Given every run's reference simulator failing from day 3 00:00 to
  // 06:00 while the boards run well: as the burst above, the 10th failure
  // (04:30) makes 10 of 48 runs (21%) and demotes,
  sim.reference_down = {{3 * kDay, 3 * kDay + 6 * kHour}};
  Standing s = sim.standingAt(3 * kDay + 4 * kHour);
  CHECK(s.ratio.infra_failures == 9);
  CHECK(s.incidents.empty());
  sim.runUntil(3 * kDay + 4 * kHour + 30 * kMin);
  REQUIRE(sim.transitions.size() == 1);
  CHECK(sim.transitions[0].reason == "demoted to tier 2 at 2026-12-04T04:30Z: infrastructure failures in 10 of 48 "
                                     "runs (21%) over 24h, above 20%");
  // but no board has an incident (none could resolve it), and the healthy
  // period restarts at the last failure (05:30): promoted at day 4 05:30.
  sim.runUntil(14 * kDay);
  CHECK(sim.policy.incidents().open().empty());
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[1].kind == Transition::Kind::promoted);
  CHECK(sim.transitions[1].at_ms == T0 + 4 * kDay + 5 * kHour + 30 * kMin);
}

TEST_CASE("sla sim: test failures only never demote") {
  Sim sim;
  // Given every run of two weeks failing its own tests.
  sim.test_failures = true;
  Standing s = sim.standingAt(7 * kDay);
  CHECK(s.ratio.runs == 48);
  CHECK(s.ratio.infra_failures == 0);
  sim.runUntil(14 * kDay);
  CHECK(sim.transitions.empty());
  CHECK(sim.policy.effectiveTier() == 1);
}

TEST_CASE("sla sim: a test failure on a broken board's run resolves it as the board worked") {
  Sim sim;
  // Given stm32-2's run failing at day 1 00:30, then a run on it that
  // fails its tests at 01:00 (outside the schedule): resolved, no incident.
  sim.runUntil(kDay + 30 * kMin);
  sim.keep(sim.policy.onRun(T0 + kDay + 30 * kMin, "stm32-2", "", RunResult::infra_failure, "flash timeout"));
  REQUIRE(sim.policy.incidents().open().size() == 1);
  sim.keep(sim.policy.onRun(T0 + kDay + 31 * kMin, "stm32-2", "", RunResult::test_failure));
  CHECK(sim.policy.incidents().open().empty());
}

TEST_CASE("sla sim: recovery promotes after the healthy period one tier at a time") {
  Sim sim;
  // Given stm32-2 broken from day 1 00:20 to day 5: incident at day 1
  // 00:30; 1 -> 2 at day 2 00:30 (24 h), 2 -> 3 at day 4 00:30 (tier 2's
  // 72 h). Resolved at day 5 00:15; 3 -> 2 at day 6 00:15, 2 -> 1 at day
  // 7 00:15 (each promotion restarts the 24 h healthy period).
  sim.faults = {{"stm32-2", kDay + 20 * kMin, 5 * kDay}};
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 4);
  const std::vector<std::tuple<int64_t, int, int>> expected{
      {2 * kDay + 30 * kMin, 1, 2}, {4 * kDay + 30 * kMin, 2, 3}, {6 * kDay + 15 * kMin, 3, 2}, {7 * kDay + 15 * kMin, 2, 1}};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("transition " << i << ": " << sim.transitions[i].reason);
    CHECK(sim.transitions[i].at_ms == T0 + std::get<0>(expected[i]));
    CHECK(sim.transitions[i].from == std::get<1>(expected[i]));
    CHECK(sim.transitions[i].to == std::get<2>(expected[i]));
  }
  CHECK(sim.transitions[1].reason ==
        "demoted to tier 3 at 2026-12-05T00:30Z: infrastructure failure on stm32-2 (flash timeout) unresolved for 72h");
  CHECK(sim.transitions[2].reason == "promoted to tier 2 at 2026-12-07T00:15Z: healthy for 24h "
                                     "(no infrastructure failure, every board's checks green)");
  CHECK(sim.policy.effectiveTier() == 1);
}

TEST_CASE("sla sim: the registered tier caps promotion") {
  Sim sim(options(2));
  // A registered tier-2 agent demoted to 3 comes back to 2, never 1.
  sim.faults = {{"stm32-2", kDay + 20 * kMin, 5 * kDay}};
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[0].at_ms == T0 + 4 * kDay + 30 * kMin); // day 1 00:30 + tier 2's 72 h
  CHECK(sim.transitions[0].to == 3);
  CHECK(sim.transitions[1].to == 2);
  CHECK(sim.transitions[1].at_ms == T0 + 6 * kDay + 15 * kMin); // resolved day 5 00:15, + 24 h
  CHECK(sim.policy.effectiveTier() == 2);
}

TEST_CASE("sla sim: flapping input gives no flapping output") {
  Sim sim;
  // Given a demotion (stm32-2 broken from day 0 00:20 to day 2: 1 -> 2 at
  // day 1 00:30, resolved day 2 00:15), then stm32-3 breaking for an hour
  // every 12 h, 10 times, from day 2 12:40: each time its run at 13:00 (or
  // 01:00) fails and its check an hour later (14:25 / 02:25) passes. No
  // 24 h is ever healthy until the last one, resolved day 7 02:25: one
  // promotion at day 8 02:25, and no other transition.
  sim.faults = {{"stm32-2", 20 * kMin, 2 * kDay}};
  for (int j = 0; j < 10; ++j)
    sim.faults.push_back({"stm32-3", 2 * kDay + 12 * kHour + j * 12 * kHour + 40 * kMin,
                          2 * kDay + 12 * kHour + j * 12 * kHour + 100 * kMin});
  Standing s = sim.standingAt(2 * kDay + 13 * kHour);
  REQUIRE(s.incidents.size() == 1);
  CHECK(s.incidents[0].incident.boards == std::vector<std::string>{"stm32-3"});
  CHECK(s.warning == "tier 2 → 3 in 72 h 0 m unless stm32-3 recovers");
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[0].at_ms == T0 + kDay + 30 * kMin);
  CHECK(sim.transitions[0].kind == Transition::Kind::demoted);
  CHECK(sim.transitions[1].at_ms == T0 + 8 * kDay + 2 * kHour + 25 * kMin);
  CHECK(sim.transitions[1].kind == Transition::Kind::promoted);
}

TEST_CASE("sla sim: a pin holds the effective tier while the policy moves underneath") {
  Sim sim;
  // Given a pin to tier 2 at day 1 00:00 and stm32-2 broken from day 1
  // 00:20 to day 3: the policy demotes to 2 at day 2 00:30 (the effective
  // tier stays the pin's), resolved day 3 00:15. Unpinned at day 3 12:00:
  // the effective tier is the policy's 2; promoted to 1 at day 4 00:15.
  sim.faults = {{"stm32-2", kDay + 20 * kMin, 3 * kDay}};
  sim.runUntil(kDay);
  auto bad = sim.policy.pin(T0 + kDay, 0, "alice", "typo");
  CHECK(bad.status().code() == hwfarm::Code::invalid_argument);
  auto pinned = sim.policy.pin(T0 + kDay, 2, "alice", "lab move");
  REQUIRE(pinned.ok());
  CHECK(pinned->reason == "pinned to tier 2 at 2026-12-02T00:00Z by alice: lab move");
  CHECK(pinned->from == 1);
  CHECK(sim.policy.effectiveTier() == 2);
  Standing s = sim.standingAt(kDay + 2 * kHour);
  CHECK_FALSE(s.ms_to_demotion);
  CHECK(s.pinned == 2);
  CHECK(s.warning == pinned->reason);

  sim.runUntil(3 * kDay + 12 * kHour);
  REQUIRE(sim.transitions.size() == 1);
  CHECK(sim.transitions[0].at_ms == T0 + 2 * kDay + 30 * kMin);
  CHECK(sim.transitions[0].effective == 2);
  CHECK(sim.transitions[0].reason == "demoted to tier 2 at 2026-12-03T00:30Z: infrastructure failure on stm32-2 "
                                     "(flash timeout) unresolved for 24h (pinned to tier 2: the effective tier stays)");
  CHECK(sim.policy.effectiveReason() == pinned->reason);
  auto unpinned = sim.policy.unpin(T0 + 3 * kDay + 12 * kHour, "alice", "moved");
  REQUIRE(unpinned);
  CHECK(unpinned->reason == "unpinned at 2026-12-04T12:00Z by alice: moved; serving tier 2 (policy)");
  CHECK(sim.policy.effectiveTier() == 2);
  CHECK_FALSE(sim.policy.unpin(T0 + 3 * kDay + 12 * kHour, "alice", "again"));
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[1].at_ms == T0 + 4 * kDay + 15 * kMin);
  CHECK(sim.policy.effectiveTier() == 1);
  CHECK(sim.policy.transitions().size() == 4); // pin, demotion, unpin, promotion
}

TEST_CASE("sla sim: a pin above the registered tier is refused") {
  SlaPolicy p(options(2));
  auto r = p.pin(T0, 1, "bob", "want pr");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "cannot pin tier 1, above the registered tier 2");
  CHECK(p.effectiveTier() == 2);
}

TEST_CASE("sla sim: a correlated hub fault counts as one incident") {
  Sim sim;
  // Given hub 1-1 (stm32-1, stm32-2) dead from day 2 00:20 to day 4:
  // stm32-2's run fails at 00:30, stm32-1's check at 01:05 (within the 1 h
  // correlation window): one hub incident from 00:30, demoting at day 3
  // 00:30. Both are resolved by their checks at day 4 00:05 and 00:15;
  // promotion at day 5 00:15.
  sim.faults = {{"stm32-1", 2 * kDay + 20 * kMin, 4 * kDay}, {"stm32-2", 2 * kDay + 20 * kMin, 4 * kDay}};
  Standing s = sim.standingAt(2 * kDay + 2 * kHour);
  REQUIRE(s.incidents.size() == 1);
  CHECK(s.incidents[0].incident.scope == Scope::hub);
  CHECK(s.incidents[0].incident.opened_ms == T0 + 2 * kDay + 30 * kMin);
  CHECK(s.incidents[0].incident.boards == std::vector<std::string>{"stm32-2", "stm32-1"});
  CHECK(s.warning == "tier 1 → 2 in 22 h 30 m unless hub 1-1 (stm32-2 and stm32-1) recovers");
  CHECK(sim.policy.incidents().correlated("stm32-1"));
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 2);
  CHECK(sim.transitions[0].at_ms == T0 + 3 * kDay + 30 * kMin);
  CHECK(sim.transitions[0].reason == "demoted to tier 2 at 2026-12-04T00:30Z: infrastructure failure on hub 1-1 "
                                     "(stm32-2, stm32-1: flash timeout) unresolved for 24h");
  CHECK(sim.transitions[1].at_ms == T0 + 5 * kDay + 15 * kMin);
}

TEST_CASE("sla sim: a restart resumes from the saved state or from replayed inputs") {
  // Given the unresolved-failure schedule stopped at day 3 12:00 (demoted
  // at day 3 00:30, incident still open).
  Sim sim;
  sim.faults = {{"stm32-2", 2 * kDay + 20 * kMin, 5 * kDay}};
  sim.runUntil(3 * kDay + 12 * kHour);
  REQUIRE(sim.transitions.size() == 1);
  // When a new policy starts from state(), it stands where the old one did
  // and makes the same next decision.
  SlaPolicy resumed(options(), sim.policy.state());
  Standing a = sim.policy.standing(T0 + 3 * kDay + 12 * kHour);
  Standing b = resumed.standing(T0 + 3 * kDay + 12 * kHour);
  CHECK(b.effective == 2);
  CHECK(b.warning == a.warning);
  CHECK(b.reason == a.reason);
  CHECK(b.ratio.runs == a.ratio.runs);
  CHECK(resumed.nextDecisionMs() == sim.policy.nextDecisionMs());
  // Resolution at day 4: both promote at day 5 00:15.
  sim.keep(sim.policy.onCheck(T0 + 4 * kDay, "stm32-2", "", true));
  auto r1 = sim.policy.advanceTo(T0 + 6 * kDay);
  resumed.onCheck(T0 + 4 * kDay, "stm32-2", "", true);
  auto r2 = resumed.advanceTo(T0 + 6 * kDay);
  REQUIRE(r1.size() == 1);
  REQUIRE(r2.size() == 1);
  CHECK(r1[0].at_ms == T0 + 5 * kDay);
  CHECK(r2[0].reason == r1[0].reason);
}

TEST_CASE("sla: a fresh agent's tier took effect when its history started and stays so until a transition") {
  // Given a fresh policy (no saved state) advanced for the first time at T0,
  SlaPolicy p(options());
  p.advanceTo(T0);
  // its registered tier took effect then,
  CHECK(p.effectiveSinceMs() == T0);
  CHECK(p.standing(T0).since_ms == T0);
  CHECK(p.effectiveReason() == "registered tier 1");
  // a day of inputs that change no tier keeps that time,
  p.onRun(T0 + kHour, "stm32-1", "", RunResult::passed);
  p.onCheck(T0 + 2 * kHour, "stm32-2", "", true);
  p.advanceTo(T0 + kDay);
  CHECK(p.effectiveSinceMs() == T0);
  // and a policy resumed from its state keeps it too.
  SlaPolicy resumed(options(), p.state());
  resumed.advanceTo(T0 + 2 * kDay);
  CHECK(resumed.effectiveSinceMs() == T0);
}

TEST_CASE("sla: a saved state that does not know since when its tier holds keeps it unknown") {
  // Given a state saved before the start of the history was kept (0),
  SlaPolicy p(options());
  p.advanceTo(T0);
  SlaState old = p.state();
  old.effective_since_ms = 0;
  // a policy resumed from it does not make up a time.
  SlaPolicy resumed(options(), old);
  resumed.advanceTo(T0 + kDay);
  CHECK(resumed.effectiveSinceMs() == 0);
  CHECK(resumed.standing(T0 + kDay).since_ms == 0);
}

TEST_CASE("sla sim: the next decision time is when the window ends") {
  SlaPolicy p(options());
  CHECK_FALSE(p.nextDecisionMs());
  p.onInfraFailure(T0, "stm32-4", "", "board lost");
  CHECK(p.nextDecisionMs() == T0 + 24 * kHour);
  CHECK(p.advanceTo(T0 + 24 * kHour - 1).empty());
  auto t = p.advanceTo(T0 + 30 * kHour);
  REQUIRE(t.size() == 1);
  CHECK(t[0].at_ms == T0 + 24 * kHour);
  CHECK(t[0].reason == "demoted to tier 2 at 2026-12-02T00:00Z: infrastructure failure on stm32-4 (board lost) "
                       "unresolved for 24h");
  CHECK(p.nextDecisionMs() == T0 + 72 * kHour);
}

TEST_CASE("sla sim: replaying the stored inputs rebuilds the same transitions") {
  Sim sim;
  sim.faults = {{"stm32-2", kDay + 20 * kMin, 5 * kDay}, {"stm32-3", 9 * kDay, 9 * kDay + 2 * kHour, true}};
  sim.runUntil(14 * kDay);
  REQUIRE(sim.transitions.size() == 4);
  SlaPolicy replayed(options());
  std::vector<Transition> again;
  for (const auto& in : sim.log) {
    auto t = in.is_check ? replayed.onCheck(in.at_ms, in.board, "", in.passed, "no banner")
                         : replayed.onRun(in.at_ms, in.board, "", in.result, "flash timeout");
    again.insert(again.end(), t.begin(), t.end());
  }
  auto tail = replayed.advanceTo(T0 + 14 * kDay);
  again.insert(again.end(), tail.begin(), tail.end());
  REQUIRE(again.size() == sim.transitions.size());
  for (size_t i = 0; i < again.size(); ++i) {
    CHECK(again[i].at_ms == sim.transitions[i].at_ms);
    CHECK(again[i].reason == sim.transitions[i].reason);
  }
  CHECK(replayed.effectiveTier() == sim.policy.effectiveTier());
}

TEST_CASE("sla: an old success leaving the ratio window can demote at the exact time it leaves") {
  SlaPolicy p(options());
  // 9 passes at T0 + 0..8 min; at 12 h 6 passes, 3 failures and a pass
  // that resolves the board: 3 of 19 (16%). Each early pass leaves the
  // 24 h window at T0 + 24 h + i min; with 5 gone (i = 4) it is 3 of 14
  // (21%) > 20%.
  for (int i = 0; i < 9; ++i) p.onRun(T0 + i * kMin, "stm32-1", "", RunResult::passed);
  for (int i = 0; i < 6; ++i) p.onRun(T0 + 12 * kHour + i * kMin, "stm32-1", "", RunResult::passed);
  for (int i = 6; i < 9; ++i) p.onRun(T0 + 12 * kHour + i * kMin, "stm32-1", "", RunResult::infra_failure, "flash timeout");
  p.onRun(T0 + 12 * kHour + 9 * kMin, "stm32-1", "", RunResult::passed);
  REQUIRE(p.incidents().open().empty());
  REQUIRE(p.transitions().empty());
  CHECK(p.standing(T0 + 12 * kHour + 9 * kMin).ratio.runs == 19);
  CHECK(p.advanceTo(T0 + 24 * kHour + 4 * kMin - 1).empty());
  CHECK(p.standing(T0 + 24 * kHour + 4 * kMin - 1).ratio.runs == 15);
  auto t = p.advanceTo(T0 + 30 * kHour);
  REQUIRE(t.size() == 1);
  CHECK(t[0].at_ms == T0 + 24 * kHour + 4 * kMin);
  CHECK(t[0].reason == "demoted to tier 2 at 2026-12-02T00:04Z: infrastructure failures in 3 of 14 runs (21%) over "
                       "24h, above 20%");
}

TEST_CASE("sla: ratio_max_runs limits the ratio to the last N runs") {
  for (int64_t cap : {int64_t{0}, int64_t{10}}) {
    SlaOptions o = options();
    o.ratio_max_runs = cap;
    SlaPolicy p(o);
    // 20 passes, then failures: with the cap, the last 10 runs hold 3 of
    // 10 (30%) at the third failure; without it, 3 of 23 (13%).
    for (int i = 0; i < 20; ++i) p.onRun(T0 + i * kMin, "stm32-1", "", RunResult::passed);
    std::vector<Transition> all;
    for (int i = 0; i < 3; ++i) {
      auto t = p.onRun(T0 + (20 + i) * kMin, "stm32-2", "", RunResult::infra_failure, "flash timeout");
      all.insert(all.end(), t.begin(), t.end());
    }
    INFO("ratio_max_runs " << cap);
    if (cap == 0) {
      CHECK(all.empty());
      CHECK(p.standing(T0 + 22 * kMin).ratio.runs == 23);
    } else {
      REQUIRE(all.size() == 1);
      CHECK(all[0].at_ms == T0 + 22 * kMin);
      CHECK(all[0].reason == "demoted to tier 2 at 2026-12-01T00:22Z: infrastructure failures in 3 of 10 runs (30%) "
                             "over 24h, above 20%");
    }
  }
}

TEST_CASE("sla: tier 3 is demoted to suspended and comes back to tier 3") {
  SlaPolicy p(options(3));
  p.onInfraFailure(T0, "stm32-1", "", "board lost");
  p.advanceTo(T0 + 167 * kHour);
  Standing s = p.standing(T0 + 167 * kHour);
  CHECK(s.warning == "tier 3 → suspended in 1 h 0 m unless stm32-1 recovers");
  auto t = p.advanceTo(T0 + 168 * kHour);
  REQUIRE(t.size() == 1);
  CHECK(t[0].to == 4);
  CHECK(t[0].reason == "demoted to suspended at 2026-12-08T00:00Z: infrastructure failure on stm32-1 (board lost) "
                       "unresolved for 168h");
  CHECK(p.effectiveTier() == 4);
  s = p.standing(T0 + 168 * kHour);
  CHECK_FALSE(s.ms_to_demotion);
  CHECK(s.warning.empty());
  p.onCheck(T0 + 170 * kHour, "stm32-1", "", true);
  CHECK(p.standing(T0 + 170 * kHour).promotion_at_ms == T0 + 194 * kHour);
  t = p.advanceTo(T0 + 300 * kHour);
  REQUIRE(t.size() == 1);
  CHECK(t[0].at_ms == T0 + 194 * kHour);
  CHECK(t[0].to == 3);
  CHECK(p.effectiveTier() == 3);
}

TEST_CASE("sla: every board of the host failing is one host incident in the warning") {
  SlaPolicy p(options());
  for (int i = 0; i < 4; ++i) p.onInfraFailure(T0 + i * kMin, kBoards[i].board, "", "board lost");
  Standing s = p.standing(T0 + 4 * kMin);
  REQUIRE(s.incidents.size() == 1);
  CHECK(s.incidents[0].incident.scope == Scope::host);
  CHECK(s.warning == "tier 1 → 2 in 23 h 56 m unless the host (stm32-1, stm32-2, stm32-3 and stm32-4) recovers");
  // Two boards back: the host incident still stands for the other two.
  p.onCheck(T0 + 10 * kMin, "stm32-1", "", true);
  p.onCheck(T0 + 11 * kMin, "stm32-3", "", true);
  CHECK(p.standing(T0 + 12 * kMin).warning ==
        "tier 1 → 2 in 23 h 48 m unless the host (stm32-2 and stm32-4) recovers");
}
