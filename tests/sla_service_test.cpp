// The SLA service in process on a ManualClock: the real policy, its state
// file in a temp state dir, the event loop this test runs. Time moves only
// when a test advances the clock and calls tick(), so a demotion is checked
// to the second without sleeping.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <optional>
#include <regex>

#include "config/loader.h"
#include "daemon/core/clock.h"
#include "daemon/services/sla_service.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/in_process.h"

using namespace hwfarm;
using namespace std::chrono_literals;
using health::RunResult;

namespace {

constexpr int64_t kStartWallMs = 1'800'000'000'000; // 2027-01-15T08:00Z

config::FleetConfig fleet(const test::TempDir& dir, const std::string& extra = "", int tier = 1) {
  std::string text = test::qemuFleet(dir.file("state"), 2);
  text = std::regex_replace(text, std::regex("tier = 1"), "tier = " + std::to_string(tier));
  auto parsed = config::parseFleetConfig(text + extra, "fleet.toml");
  REQUIRE(parsed.ok());
  std::filesystem::create_directories(parsed.config->agent.state_dir);
  return *parsed.config;
}

// One SLA service on `config`, recording what its tier hook says.
struct Sla {
  ManualClock& clock;
  boost::asio::io_context io;
  std::unique_ptr<SlaService> sla;
  std::vector<std::string> tier_changes; // "<tier> <since_ms> <reason>"

  Sla(const config::FleetConfig& config, ManualClock& c) : clock(c) {
    sla = std::make_unique<SlaService>(io, config, clock);
    sla->onTierChanged([this](int tier, int64_t since, const std::string& reason) {
      tier_changes.push_back(std::to_string(tier) + " " + std::to_string(since) + " " + reason);
    });
  }
  ~Sla() { sla->stop(); }

  template <typename Pred>
  bool runUntil(Pred done) {
    return test::runLoopUntil(io, done);
  }
  // Everything changed so far is in sla.json.
  void flush() {
    std::optional<Status> saved;
    sla->flush([&](const Status& s) { saved = s; });
    REQUIRE(runUntil([&] { return saved.has_value(); }));
    REQUIRE(saved->ok());
  }
  void advance(std::chrono::milliseconds d) {
    clock.advance(d);
    sla->tick();
  }
  // pin() or unpin() run to their answer.
  Result<health::Transition> answer(const std::function<void(SlaService::PinDone)>& op) {
    std::optional<Result<health::Transition>> out;
    op([&](const Result<health::Transition>& r) { out.emplace(r); });
    REQUIRE(runUntil([&] { return out.has_value(); }));
    return *out;
  }
};

// A run's summary.json with one attempt per (board, failure class) given,
// plus the reference's attempt.
// A run's record: its reference's own failure, then each board attempt's
// failure class ("none", "test", "infrastructure").
// A run's record: its reference's attempt (passed, or with `reference_died`
// the lab's failure), then `attempts` (board, failure class).
run::Record summary(const std::string& state, const std::vector<std::pair<std::string, std::string>>& attempts,
                    bool reference_died = false) {
  run::Record r;
  r.id = "run-1";
  r.state = *run::stateFromName(state);
  run::AttemptEntry ref{"i", "ref", "", true};
  ref.judgement = reference_died ? run::Judgement{run::Outcome::error, FailureClass::infrastructure, "qemu died"}
                                 : run::Judgement{run::Outcome::pass, FailureClass::none, ""};
  r.attempts.push_back(ref);
  for (const auto& [board, cls] : attempts) {
    run::AttemptEntry a{"i", "t", board, false};
    FailureClass f = cls == "infrastructure" ? FailureClass::infrastructure
                     : cls == "test"         ? FailureClass::test
                                             : FailureClass::none;
    a.judgement = run::Judgement{f == FailureClass::none ? run::Outcome::pass : run::Outcome::fail, f, board + " " + cls};
    r.attempts.push_back(a);
  }
  return r;
}

// `r` with every attempt cut short by its cancel (none had ended when it came).
run::Record cutShort(run::Record r) {
  for (auto& a : r.attempts) a.cancelled = true;
  return r;
}

} // namespace

TEST_CASE("sla service: an infrastructure failure left unresolved demotes at exactly its window and a restart resumes there") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  config::FleetConfig config = fleet(dir, "[sla.tier1]\nresolution_window_h = 1\n");
  std::string reason =
      "demoted to tier 2 at 2027-01-15T09:00Z: infrastructure failure on sim-0 (flash timeout) unresolved for 1h";
  {
    Sla s(config, clock);
    REQUIRE(s.sla->policy().effectiveTier() == 1);
    // Given a flash timeout on sim-0 that nothing resolves,
    s.sla->infraFailure("sim-0", "flash timeout");
    // one second before the window the warning counts down the last second,
    s.advance(3599s);
    health::Standing st = s.sla->standing();
    REQUIRE(st.effective == 1);
    REQUIRE(st.ms_to_demotion == std::optional<int64_t>(1000));
    REQUIRE(st.warning == "tier 1 → 2 in 1 s unless sim-0 recovers");
    REQUIRE(s.tier_changes.empty());
    // and at the window the agent is demoted, with the reason the 409 shows.
    s.advance(1s);
    REQUIRE(s.sla->policy().effectiveTier() == 2);
    REQUIRE(s.tier_changes == std::vector<std::string>{"2 " + std::to_string(kStartWallMs + 3600'000) + " " + reason});
    REQUIRE(s.sla->metrics().transitions[static_cast<size_t>(health::Transition::Kind::demoted)] == 1);
    s.flush();
  }
  // A new service on the same state dir (a restart) serves tier 2 for the
  // same reason, since the same time, with the incident still open.
  std::string saved = test::readFile(dir.file("state/sla.json"));
  REQUIRE(saved.find("\"policy_tier\":2") != std::string::npos);
  clock.advance(10min);
  Sla again(config, clock);
  const health::SlaPolicy& p = again.sla->policy();
  REQUIRE(p.effectiveTier() == 2);
  REQUIRE(p.effectiveReason() == reason);
  REQUIRE(p.effectiveSinceMs() == kStartWallMs + 3600'000);
  REQUIRE(p.transitions().size() == 1);
  REQUIRE(p.transitions().back().reason == reason);
  REQUIRE(p.incidents().open().size() == 1);
  REQUIRE(p.incidents().open().front().unresolved == std::vector<std::string>{"sim-0"});
  // Tier 2's window (72 h by default) counts from the first failure.
  health::Standing st = again.sla->standing();
  REQUIRE(st.ms_to_demotion == std::optional<int64_t>(72 * 3600'000LL - 3600'000 - 600'000));
  again.flush(); // (its start-up save may be under way: the temp file exists while it is)
  REQUIRE_FALSE(std::filesystem::exists(dir.file("state/.sla.json.tmp")));
}

TEST_CASE("sla service: a run without an infrastructure failure on the board resolves its incident and a cancelled run does not") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  Sla s(fleet(dir), clock);
  s.sla->infraFailure("sim-0", "board vanished while leased");
  s.advance(1h);
  // An attempt a cancel cut short says nothing about the board,
  s.sla->runEnded(cutShort(summary("cancelled", {{"sim-0", "none"}})));
  REQUIRE(s.sla->policy().incidents().open().size() == 1);
  // one that ran on another board neither,
  s.sla->runEnded(summary("passed", {{"sim-1", "none"}}));
  REQUIRE(s.sla->policy().incidents().open().size() == 1);
  // nor the simulator as a target, failed or not,
  s.sla->runEnded(summary("error", {{"qemu", "infrastructure"}, {"@qemu", "none"}}));
  REQUIRE(s.sla->policy().incidents().open().size() == 1);
  REQUIRE(s.sla->standing().ratio.runs == 1); // the run on sim-1 only
  // but one whose tests failed on sim-0 shows the board flashed and ran.
  s.sla->runEnded(summary("failed", {{"sim-0", "test"}}));
  REQUIRE(s.sla->policy().incidents().open().empty());
  s.advance(48h);
  REQUIRE(s.sla->policy().effectiveTier() == 1);
  REQUIRE(s.sla->policy().transitions().empty());
  // Those runs are older than tier 1's 24 h ratio window now; a new one
  // counts.
  health::Standing st = s.sla->standing();
  REQUIRE(st.ratio.runs == 0);
  s.sla->runEnded(summary("error", {{"sim-1", "infrastructure"}, {"sim-1", "none"}}));
  st = s.sla->standing();
  REQUIRE(st.ratio.runs == 1);
  REQUIRE(st.ratio.infra_failures == 1);
  REQUIRE(st.incidents.size() == 1);
  REQUIRE(st.incidents.front().incident.detail == "sim-1 infrastructure");
}

TEST_CASE("sla service: a reference simulator's own failure counts once in the ratio, against no board") {
  // Given a run whose reference simulator died (the lab's failure), on two
  // boards whose targets failed only because of it, or by their own tests,
  run::Record r = summary("error", {{"sim-0", "infrastructure"}, {"sim-1", "test"}}, true);
  r.attempts[1].judgement->reference_failed = true;
  // it is one reference_failure, on the first board, and no failure of either board's,
  auto outcomes = boardOutcomes(r);
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].result == RunResult::reference_failure);
  CHECK(outcomes[0].detail == "reference simulator: qemu died");
  CHECK(outcomes[1].result == RunResult::test_failure);
  // (a board's own infrastructure failure stays one, and takes the count)
  auto own = boardOutcomes(summary("error", {{"sim-0", "infrastructure"}}, true));
  REQUIRE(own.size() == 1);
  CHECK(own[0].result == RunResult::infra_failure);
  CHECK(boardOutcomes(summary("failed", {{"sim-0", "test"}}, true)).at(0).result == RunResult::reference_failure);
  // and the SLA counts it in the ratio without an incident: the boards
  // ran, and one open before on sim-0 is resolved by it.
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  Sla s(fleet(dir), clock);
  s.sla->infraFailure("sim-0", "board vanished while leased");
  s.advance(1h);
  s.sla->runEnded(r);
  health::Standing st = s.sla->standing();
  CHECK(st.ratio.runs == 2);
  CHECK(st.ratio.infra_failures == 1);
  CHECK(st.incidents.empty());
  // The record keeps which target failed by its reference's doing.
  Result<run::Record> back = run::Record::fromJson(r.toJson());
  REQUIRE(back.ok());
  CHECK(back->attempts[1].judgement->reference_failed);
  CHECK_FALSE(back->attempts[2].judgement->reference_failed);
}

TEST_CASE("sla service: a failed health check opens an incident and a clean one resolves it") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  Sla s(fleet(dir), clock);
  s.sla->checkEnded("sim-1", false, "no banner within 10 s");
  REQUIRE(s.sla->standing().incidents.front().incident.describe() == "sim-1 (health check: no banner within 10 s)");
  s.advance(23h);
  s.sla->checkEnded("sim-1", true, "");
  s.advance(2h);
  REQUIRE(s.sla->standing().incidents.empty());
  REQUIRE(s.sla->policy().effectiveTier() == 1);
}

TEST_CASE("sla service: failures naming one USB hub make one incident against the hub") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  Sla s(fleet(dir, "  [[worker.board]]\n  name = \"sim-2\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n"), clock);
  // Given two of three boards fail with the hub the daemon found them on,
  s.sla->infraFailure("sim-0", "run run-1: flash timeout [hub 1-4]");
  REQUIRE_FALSE(s.sla->correlated("sim-0"));
  s.advance(5min);
  s.sla->infraFailure("sim-1", "run run-2: flash timeout [hub 1-4]");
  // they are one incident against the hub, with the first failure's detail.
  auto st = s.sla->standing();
  REQUIRE(st.incidents.size() == 1);
  REQUIRE(st.incidents.front().incident.describe() == "hub 1-4 (sim-0, sim-1: run run-1: flash timeout)");
  REQUIRE(s.sla->correlated("sim-0"));
  REQUIRE(s.sla->correlated("sim-1"));
  REQUIRE_FALSE(s.sla->correlated("sim-2"));
  // A bracket that names no hub stays part of the detail (two hours on:
  // not merged into a host incident).
  s.advance(2h);
  s.sla->infraFailure("sim-2", "console said [hub ]");
  REQUIRE(s.sla->standing().incidents.back().incident.detail == "console said [hub ]");
}

TEST_CASE("sla service: a run's outcome per board is the worst of its attempts there") {
  auto outcomes = boardOutcomes(summary("error", {{"sim-0", "none"},
                                                  {"sim-1", "test"},
                                                  {"sim-0", "infrastructure"},
                                                  {"sim-1", "none"},
                                                  {"sim-2", "none"}}));
  REQUIRE(outcomes.size() == 3);
  REQUIRE(outcomes[0].board == "sim-0");
  REQUIRE(outcomes[0].result == RunResult::infra_failure);
  REQUIRE(outcomes[0].detail == "sim-0 infrastructure");
  REQUIRE(outcomes[1].board == "sim-1");
  REQUIRE(outcomes[1].result == RunResult::test_failure);
  REQUIRE(outcomes[2].result == RunResult::passed);
  // A cancelled run: what the cancel cut short counts for nothing, what
  // ended before it counts.
  REQUIRE(boardOutcomes(cutShort(summary("cancelled", {{"sim-0", "infrastructure"}}))).empty());
  run::Record cancelled = summary("cancelled", {{"sim-0", "infrastructure"}, {"sim-1", "test"}});
  cancelled.attempts[2].cancelled = true;
  auto before = boardOutcomes(cancelled);
  REQUIRE(before.size() == 1);
  REQUIRE(before[0].board == "sim-0");
  REQUIRE(before[0].result == RunResult::infra_failure);
  REQUIRE(boardOutcomes(summary("running", {{"sim-0", "none"}})).empty());
  // A record that cannot be read gives no outcomes: it is never read.
  REQUIRE_FALSE(run::Record::fromJson("{not json").ok());
  REQUIRE_FALSE(run::Record::fromJson(R"({"state":"passed","attempts":[1,{"board":7}]})").ok());
}

TEST_CASE("sla service: a pin is saved before its answer and unpin returns to the policy") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  config::FleetConfig config = fleet(dir, "", 2);
  Sla s(config, clock);
  SlaService& sla = *s.sla;
  // Above the registered tier, or no tier at all: refused, nothing changes.
  auto above = s.answer([&](auto done) { sla.pin(1, "alice", "want more", done); });
  REQUIRE(above.status().code() == Code::invalid_argument);
  REQUIRE(above.status().message() == "cannot pin tier 1, above the registered tier 2");
  REQUIRE(s.answer([&](auto done) { sla.pin(4, "alice", "x", done); }).status().code() == Code::invalid_argument);
  REQUIRE(sla.policy().transitions().empty());

  auto pinned = s.answer([&](auto done) { sla.pin(3, "alice", "lab move", done); });
  REQUIRE(pinned.ok());
  REQUIRE(pinned->reason == "pinned to tier 3 at 2027-01-15T08:00Z by alice: lab move");
  // On disk when answered: who, why and the tier.
  std::string saved = test::readFile(dir.file("state/sla.json"));
  REQUIRE(saved.find(R"("pin":{"tier":3,"by":"alice","reason":"lab move")") != std::string::npos);
  REQUIRE(sla.policy().effectiveTier() == 3);
  REQUIRE(s.tier_changes.back() == "3 " + std::to_string(kStartWallMs) + " " + pinned->reason);

  s.advance(2h);
  auto unpinned = s.answer([&](auto done) { sla.unpin("bob", "moved", done); });
  REQUIRE(unpinned.ok());
  REQUIRE(unpinned->reason == "unpinned at 2027-01-15T10:00Z by bob: moved; serving tier 2 (policy)");
  REQUIRE(sla.policy().effectiveTier() == 2);
  REQUIRE_FALSE(sla.pinRecord());
  REQUIRE(test::readFile(dir.file("state/sla.json")).find(R"("pin":null)") != std::string::npos);
  REQUIRE(s.answer([&](auto done) { sla.unpin("bob", "again", done); }).status().code() == Code::not_found);
  REQUIRE(sla.metrics().transitions[static_cast<size_t>(health::Transition::Kind::pinned)] == 1);
  REQUIRE(sla.metrics().transitions[static_cast<size_t>(health::Transition::Kind::unpinned)] == 1);
}

TEST_CASE("sla service: sla.pin_tier pins by config and refuses an operator's pin and its removal lifts only its own pin") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  config::FleetConfig plain = fleet(dir);
  config::FleetConfig pinned = fleet(dir, "[sla]\npin_tier = 3\n");
  {
    Sla s(pinned, clock);
    REQUIRE(s.sla->policy().effectiveTier() == 3);
    REQUIRE(s.sla->pinRecord()->by == "config");
    REQUIRE(s.sla->policy().effectiveReason() ==
            "pinned to tier 3 at 2027-01-15T08:00Z by config: sla.pin_tier = 3 in fleet.toml");
    auto refused = s.answer([&](auto done) { s.sla->pin(2, "alice", "x", done); });
    REQUIRE(refused.status().code() == Code::conflict);
    REQUIRE(refused.status().message() == "the tier is pinned to 3 by sla.pin_tier in fleet.toml; change it there");
    REQUIRE(s.answer([&](auto done) { s.sla->unpin("alice", "x", done); }).status().code() == Code::conflict);
    s.flush();
  }
  {
    // A restart with the same config does not pin again.
    Sla s(pinned, clock);
    REQUIRE(s.sla->policy().transitions().size() == 1);
    // A reload without pin_tier lifts the config's pin.
    s.sla->reconfigure(plain);
    REQUIRE(s.sla->policy().effectiveTier() == 1);
    REQUIRE(s.sla->policy().transitions().back().reason ==
            "unpinned at 2027-01-15T08:00Z by config: sla.pin_tier removed from fleet.toml; serving tier 1 (policy)");
  }
  {
    // That reload was saved: ten minutes later a restart finds it unpinned
    // at 08:00, not again now.
    clock.advance(10min);
    Sla s(plain, clock);
    REQUIRE(s.sla->policy().transitions().size() == 2);
    REQUIRE(s.sla->policy().transitions().back().at_ms == kStartWallMs);
    // An operator's pin then stays through a reload without pin_tier.
    REQUIRE(s.answer([&](auto done) { s.sla->pin(2, "alice", "lab move", done); }).ok());
    s.sla->reconfigure(plain);
    REQUIRE(s.sla->policy().effectiveTier() == 2);
    REQUIRE(s.sla->pinRecord()->by == "alice");
  }
}

TEST_CASE("sla service: a board taken out of the configuration resolves what it left unresolved") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  config::FleetConfig two = fleet(dir); // failures an hour apart: no host incident
  config::FleetConfig one = two;
  one.workers.front().boards.pop_back(); // sim-1 goes
  Sla s(two, clock);
  s.sla->infraFailure("sim-1", "flash timeout");
  s.advance(61min);
  s.sla->infraFailure("sim-0", "flash timeout");
  REQUIRE(s.sla->standing().incidents.size() == 2);
  s.sla->reconfigure(one);
  auto st = s.sla->standing();
  REQUIRE(st.incidents.size() == 1);
  REQUIRE(st.incidents.front().incident.subject() == "sim-0");
}

TEST_CASE("sla service: a registered tier lowered while hwfarmd was down brings the policy tier down to it") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  {
    Sla s(fleet(dir), clock);
    s.flush();
  }
  Sla s(fleet(dir, "", 2), clock);
  REQUIRE(s.sla->policy().policyTier() == 2);
  REQUIRE(s.sla->policy().effectiveTier() == 2);
}

TEST_CASE("sla service: an unreadable sla.json stops the start with the reason and is left as it is") {
  test::TempDir dir;
  ManualClock clock(kStartWallMs);
  config::FleetConfig config = fleet(dir);
  std::string path = dir.file("state/sla.json");
  for (std::string text : {std::string("{\"version\":1,"), std::string(R"({"version":2})"),
                           std::string(R"({"version":1,"policy_tier":7})")}) {
    dir.write("state/sla.json", text);
    boost::asio::io_context io;
    REQUIRE_THROWS_WITH(SlaService(io, config, clock),
                        Catch::StartsWith(path + " is not a valid SLA state (") &&
                            Catch::EndsWith("); remove it to start from the registered tier"));
    REQUIRE(test::readFile(path) == text);
  }
}

TEST_CASE("sla service: the state file round-trips every field") {
  health::SlaState s;
  s.policy_tier = 3;
  s.pinned = 3;
  s.now_ms = 5;
  s.last_transition_ms = 4;
  s.healthy_since_ms = 3;
  s.effective_since_ms = 2;
  s.effective_reason = "pinned \"x\"";
  s.runs = {{1, true}, {2, false}};
  health::Incident i;
  i.id = 7;
  i.scope = health::Scope::hub;
  i.hub = "1-1";
  i.opened_ms = 1;
  i.last_failure_ms = 2;
  i.detail = "flash timeout";
  i.boards = {"a", "b"};
  i.unresolved = {"b"};
  s.incidents = {i};
  s.next_incident_id = 8;
  s.transitions = {{1, health::Transition::Kind::promoted, 4, 3, 3, "promoted"}};
  SlaFile file{s, SlaPin{3, "alice", "why", 2}};
  auto back = decodeSlaFile(encodeSlaFile(file));
  REQUIRE(back.ok());
  REQUIRE(encodeSlaFile(*back) == encodeSlaFile(file));
  REQUIRE(back->state.incidents.front().scope == health::Scope::hub);
  REQUIRE(back->state.transitions.front().kind == health::Transition::Kind::promoted);
  REQUIRE(back->pin->by == "alice");
  // A pin without its record, or a scope nobody knows, is refused by name.
  std::string text = encodeSlaFile(file);
  auto bad_scope = decodeSlaFile(std::regex_replace(text, std::regex("\"scope\":\"hub\""), "\"scope\":\"rack\""));
  REQUIRE(bad_scope.status().message() == "sla.incidents[0].scope: expected board, hub or host");
}
