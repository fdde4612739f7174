// Board health checks through a real hwfarmd (issue 12): a simulated board
// whose health image never prints the banner is quarantined after
// health.quarantine_after failed recovery ladders, retried with a doubling
// backoff, and available again once its image is fixed; checks never touch
// a leased board (in process, on a ManualClock); `hwfarmctl board check` and
// `board show`.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "daemon/core/clock.h"
#include "daemon/services/board_service.h"
#include "daemon/services/board_targets.h"
#include "daemon/services/health_service.h"
#include "daemon/services/lease_service.h"
#include "daemon/store/database.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/in_process.h"
#include "tests/support/process.h"
#include "tests/support/firmware.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// One simulated board whose health image is `variant`'s.
std::string fleet(const TempDir& dir, const std::string& variant, const std::string& extra = "") {
  return qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") +
         "  [[worker.board]]\n  name = \"sim-h\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n"
         "  health = { image = \"" + firmware(variant) + "\", banner = \"^HWFARM HEALTH OK\", timeout_s = 1, "
         "quarantine_after = 2, retry_s = 0.2, backoff_s = 0.5, backoff_max_s = 2" + extra + " }\n";
}

json::object board(const RunningDaemon& d) { return json::parse(d.get("/v1/boards/sim-h").body).as_object(); }

std::string stateOf(const RunningDaemon& d) { return std::string(board(d).at("state").as_string()); }

bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = 30s) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

CommandResult hwfarmctl(const RunningDaemon& d, std::vector<std::string> args) {
  std::vector<std::string> argv{HWFARMCTL_PATH, "--url", d.url()};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, {}, 60s);
}

} // namespace

TEST_CASE("a board whose health image never prints the banner is quarantined after K ladders and serves again when fixed") {
  TempDir dir;
  auto daemon = std::make_unique<RunningDaemon>(dir, fleet(dir, "hang"));
  RunningDaemon& d = *daemon;
  REQUIRE(stateOf(d) == "available");
  // An operator's check: the ladder fails (check, power cycle skipped for a
  // simulator, port reset, re-enumeration skipped, check again).
  CommandResult first = hwfarmctl(d, {"board", "check", "sim-h", "--wait", "20"});
  INFO(first.out << first.err);
  CHECK(first.status.code == 9);
  CHECK(first.out.rfind("sim-h: health check failed: no console line matched health.banner \"^HWFARM HEALTH OK\" within 1000 ms", 0) == 0);
  json::object h = board(d).at("health").as_object();
  const json::object& last = h.at("history").as_array().at(0).as_object();
  CHECK(last.at("trigger").as_string() == "operator_request");
  std::vector<std::string> steps;
  for (const auto& st : last.at("steps").as_array()) steps.emplace_back(st.at("step").as_string());
  CHECK(steps == std::vector<std::string>{"check", "power_cycle", "port_reset", "reenumerate", "check"});
  CHECK(last.at("steps").as_array()[1].at("skipped").as_bool());
  // The console showed the firmware running, not the banner.
  CHECK(last.at("evidence").as_string().find("HWFARM BEGIN") != std::string::npos);
  // After the first failed ladder it is failing (recovering: not leasable);
  // the retry (retry_s) fails too: quarantined (quarantine_after = 2).
  REQUIRE(waitFor([&] { return stateOf(d) == "quarantined"; }));
  h = board(d).at("health").as_object();
  CHECK(h.at("state").as_string() == "quarantined");
  CHECK(h.at("failed_ladders").as_int64() == 2);
  CHECK(h.at("reason").as_string().rfind("quarantined after 2 failed recovery ladders", 0) == 0);
  CHECK(h.at("backoff_s").to_number<double>() == 0.5);
  auto refused = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "");
  CHECK(refused.status == 408); // nothing to lease
  // Retried with a doubling backoff (0.5 s, 1 s, 2 s at most): still failing.
  REQUIRE(waitFor([&] { return board(d).at("health").at("backoff_s").to_number<double>() >= 1.0; }));
  CHECK(stateOf(d) == "quarantined");

  // Fixed (its health image replaced by one that prints the banner): the
  // next retry passes and the board serves again.
  dir.write("fleet.toml", fleet(dir, "health"));
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  REQUIRE(waitFor([&] { return stateOf(d) == "available"; }));
  h = board(d).at("health").as_object();
  CHECK(h.at("state").as_string() == "healthy");
  CHECK(h.at("reason").as_string().rfind("passed a retry in quarantine", 0) == 0);
  CHECK(h.at("history").as_array().at(0).at("passed").as_bool());
  CHECK(h.at("history").as_array().at(0).at("trigger").as_string() == "retry");
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "");
  CHECK(granted.status == 201);
  CHECK(d.log().find("board sim-h: health quarantined -> healthy") != std::string::npos);
  // Every check, change of health and request is in the event log, with
  // who asked.
  daemon.reset();
  CommandResult events = runCommand(
      {"/usr/bin/python3", "-c",
       "import sqlite3,sys\n"
       "for k, d in sqlite3.connect(sys.argv[1]).execute(\"SELECT kind, detail FROM events WHERE board = 'sim-h' "
       "AND kind LIKE 'health%' ORDER BY id\"): print(k + ': ' + d.split(':')[0])",
       dir.file("state/hwfarm.db")});
  INFO(events.out << events.err);
  CHECK(events.out.rfind("health_check_requested: by anonymous\nhealth_check: failed (operator_request, ", 0) == 0);
  CHECK(events.out.find("health_state: failing -> quarantined") != std::string::npos);
  CHECK(events.out.find("health_state: quarantined -> healthy") != std::string::npos);
}

TEST_CASE("health checks never touch a leased board, and board show lists the checks") {
  TempDir dir;
  // Periodic checks every 0.3 s.
  RunningDaemon d(dir, fleet(dir, "health", ", interval_s = 0.3"));
  // Periodic checks run while it is free.
  REQUIRE(waitFor([&] { return board(d).at("health").at("history").as_array().size() >= 2; }));
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":10})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  size_t during = board(d).at("health").at("history").as_array().size();
  CHECK(stateOf(d) == "leased");
  // An operator's check of a leased board is refused.
  CommandResult refused = hwfarmctl(d, {"board", "check", "sim-h"});
  CHECK(refused.status.code == 1);
  CHECK(refused.err.find("board sim-h is leased (lease " + lease + "): a health check would touch it") != std::string::npos);
  REQUIRE(d.request("DELETE", "/v1/leases/" + lease, "", "").status == 200);
  REQUIRE(waitFor([&] { return board(d).at("health").at("history").as_array().size() > during; }));
  CommandResult show = hwfarmctl(d, {"board", "show", "sim-h"});
  INFO(show.out << show.err);
  CHECK(show.status.code == 0);
  CHECK(show.out.rfind("sim-h: ", 0) == 0);
  CHECK(show.out.find("  health: healthy") != std::string::npos);
  CHECK(show.out.find("STARTED") != std::string::npos);
  CHECK(show.out.find("periodic") != std::string::npos);
  CHECK(show.out.find("pass") != std::string::npos);
  CHECK(hwfarmctl(d, {"board", "show", "nope"}).status.code == 1);
  CHECK(d.request("POST", "/v1/boards/nope/check", "", "").status == 404);
}

namespace {

// The health service in process on a ManualClock, over the real lease,
// board and target services: time moves only when the test says so.
struct Lab {
  explicit Lab(const std::string& extra) {
    config = hwfarm::test::parseFleet(
        qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") +
        "  [[worker.board]]\n  name = \"sim-h\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n" + extra);
    std::filesystem::create_directories(config.agent.state_dir);
    db = hwfarm::openDatabase(config);
    leases = std::make_unique<hwfarm::LeaseService>(io, config, clock, *db);
    boards = std::make_unique<hwfarm::BoardService>(io, config, clock, [](const std::string&) { return ""; });
    targets = std::make_unique<hwfarm::BoardTargets>(io, config, *boards);
    health = std::make_unique<hwfarm::HealthService>(io, config, *boards, *targets, *leases, clock);
    hwfarm::startDatabase(*db, io);
    leases->onLeaseEnded([this](const hwfarm::lease::Lease& l) {
      boards->leaseEnded(l);
      health->leaseEnded(l);
    });
    health->onChecked([this](const std::string&, const hwfarm::health::CheckRecord&) { ++checks; });
  }
  ~Lab() {
    health->stop();
    leases->stop();
    settle();
    db.reset();
  }
  // Runs the loop until every change made so far is committed.
  void settle() {
    bool committed = false;
    leases->whenCommitted([&] { committed = true; });
    REQUIRE(hwfarm::test::runLoopUntil(io, [&] { return committed; }));
  }
  // Moves time on in steps of `step`, `n` times, firing what is due.
  void advance(std::chrono::milliseconds step, int n = 1) {
    for (int i = 0; i < n; ++i) {
      clock.advance(step);
      leases->tick();
      health->tick();
      settle();
    }
  }

  TempDir dir;
  hwfarm::ManualClock clock{1'800'000'000'000};
  boost::asio::io_context io;
  hwfarm::config::FleetConfig config;
  std::unique_ptr<hwfarm::store::Database> db;
  std::unique_ptr<hwfarm::LeaseService> leases;
  std::unique_ptr<hwfarm::BoardService> boards;
  std::unique_ptr<hwfarm::BoardTargets> targets;
  std::unique_ptr<hwfarm::HealthService> health;
  size_t checks = 0;
};

} // namespace

TEST_CASE("a leased board is never checked, whatever time passes, and its checks resume once its lease ends") {
  // Given a board checked every 0.3 s while it is free,
  Lab lab("  health = { interval_s = 0.3 }\n");
  lab.advance(100ms, 8);
  REQUIRE(hwfarm::test::runLoopUntil(lab.io, [&] { return lab.checks >= 2; }));
  // when it is leased, ten intervals pass without a check;
  hwfarm::lease::LeaseRequest request;
  request.selector.type = "mps2-an385";
  request.holder = {"pipeline", "job", "1", "hw", ""};
  request.count = 1;
  request.ttl_ms = 600000;
  std::optional<hwfarm::AcquireOutcome> granted;
  lab.leases->acquire(request, 0, [&](const hwfarm::AcquireOutcome& o) { granted = o; }, nullptr);
  REQUIRE(hwfarm::test::runLoopUntil(lab.io, [&] { return granted.has_value(); }));
  REQUIRE(granted->status.ok());
  lab.settle();
  size_t during = lab.checks;
  lab.advance(300ms, 10);
  CHECK(lab.checks == during);
  CHECK(lab.leases->scheduler().board("sim-h")->state == hwfarm::lease::BoardState::leased);
  // once the lease ends, the board is checked again.
  std::optional<hwfarm::lease::OpResult> released;
  lab.leases->release(granted->lease.id, [&](const hwfarm::lease::OpResult& r) { released = r; });
  REQUIRE(hwfarm::test::runLoopUntil(lab.io, [&] { return released.has_value(); }));
  lab.advance(100ms, 8);
  CHECK(hwfarm::test::runLoopUntil(lab.io, [&] { return lab.checks > during; }));
}
