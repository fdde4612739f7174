// The lease API against a real hwfarmd over real sockets: roles, body
// limits, expiry, long-poll grants over held connections, tiers across
// reloads, disconnects and kill -9. What each lease route answers, and that
// refusals change nothing, is tested in process (lease_routes_test).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <future>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"
#include "tests/support/requests.h"
#include "tests/support/wait.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

const std::string kViewer = "secret-viewer";
const std::string kPipeline = "secret-pipeline";
const std::string kPipeline2 = "secret-pipeline2";
const std::string kOperator = "secret-operator";

json::value parse(const hwfarm::cli::HttpResult& r) { return json::parse(r.body); }

std::string leaseIdOf(const hwfarm::cli::HttpResult& r) { return std::string(parse(r).at("id").as_string()); }

size_t activeLeases(const RunningDaemon& d) {
  return parse(d.get("/v1/leases", kOperator)).at("leases").as_array().size();
}

size_t queueDepth(const RunningDaemon& d) {
  return parse(d.get("/v1/queue", kOperator)).at("queue").as_array().size();
}

std::string boardState(const RunningDaemon& d, const std::string& name) {
  json::value boards = parse(d.get("/v1/boards", kOperator));
  for (const auto& b : boards.at("boards").as_array())
    if (b.at("name").as_string() == name) return std::string(b.at("state").as_string());
  return "";
}

} // namespace

TEST_CASE("the auth matrix: role by endpoint") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 3));
  // A lease of "pipeline" that other callers try to touch.
  auto own = d.request("POST", "/v1/leases", acquireBody(), kPipeline);
  REQUIRE(own.status == 201);
  std::string id = leaseIdOf(own);

  struct Row {
    std::string method, target, body;
    int none, bad, viewer, pipeline2, op;
  };
  // Expected status per caller: no token, a wrong token, viewer, another
  // pipeline, operator.
  std::vector<Row> rows{
      {"GET", "/v1/healthz", "", 200, 200, 200, 200, 200},
      {"GET", "/metrics", "", 401, 401, 200, 200, 200},
      {"GET", "/v1/boards", "", 401, 401, 200, 200, 200},
      {"GET", "/v1/queue", "", 401, 401, 200, 200, 200},
      {"GET", "/v1/leases", "", 401, 401, 200, 200, 200},
      {"GET", "/v1/leases/" + id, "", 401, 401, 200, 200, 200},
      {"POST", "/v1/leases", acquireBody(), 401, 401, 403, 201, 201},
      {"POST", "/v1/leases/" + id + "/renew", "", 401, 401, 403, 403, 200},
      {"POST", "/v1/boards/sim-2/maintenance", "", 401, 401, 403, 403, 409},
      {"POST", "/v1/boards/sim-2/resume", "", 401, 401, 403, 403, 409},
      {"DELETE", "/v1/leases/" + id, "", 401, 401, 403, 403, 200},
  };
  for (const auto& row : rows) {
    INFO(row.method << " " << row.target);
    REQUIRE(d.request(row.method, row.target, row.body, "").status == row.none);
    REQUIRE(d.request(row.method, row.target, row.body, "not-a-token").status == row.bad);
    REQUIRE(d.request(row.method, row.target, row.body, kViewer).status == row.viewer);
    REQUIRE(d.request(row.method, row.target, row.body, kPipeline2).status == row.pipeline2);
    REQUIRE(d.request(row.method, row.target, row.body, kOperator).status == row.op);
  }
  // The operator's DELETE of another holder's lease is a revocation.
  auto lease = parse(d.get("/v1/leases/" + id, kViewer));
  REQUIRE(lease.at("state").as_string() == "revoked");
  REQUIRE(lease.at("end_reason").as_string() == "revoked: force-released by operator \"operator\"");
  auto unauthorized = d.request("GET", "/v1/boards", "", "");
  REQUIRE(parse(unauthorized).at("detail").as_string() ==
          "this endpoint needs a bearer token (Authorization: Bearer TOKEN)");
  auto forbidden = d.request("POST", "/v1/leases", acquireBody(), kViewer);
  REQUIRE(parse(forbidden).at("detail").as_string() ==
          "role viewer of \"viewer\" may not POST /v1/leases (needs pipeline)");
}

TEST_CASE("a lease body over limits.max_body_bytes is 413 from the server and grants nothing") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  auto big = d.request("POST", "/v1/leases", std::string(70 * 1024, ' '), kPipeline);
  REQUIRE(big.status == 413);
  REQUIRE(activeLeases(d) == 0);
  REQUIRE(queueDepth(d) == 0);
  REQUIRE(boardState(d, "sim-0") == "available");
  REQUIRE(d.get("/metrics", kViewer).body.find("hwfarm_lease_grants_total{agent=\"test-lab\"} 0") != std::string::npos);
}

// Expiry, recovery, wait timeouts and aging are timed to the millisecond in
// process on a ManualClock (lease_service_test.cpp); the tests here show the
// HTTP path and what only a process shows (kill -9, restart).

TEST_CASE("a board recovering when hwfarmd is killed is still recovering after the restart") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1, "[leases]\nrecovery_s = 600\n"));
  auto r = d.request("POST", "/v1/leases", acquireBody(1), kPipeline);
  REQUIRE(r.status == 201);
  // Given the board recovering from a lease that ended against its holder's
  // will (an operator's revocation, as an expiry does),
  REQUIRE(d.request("DELETE", "/v1/leases/" + leaseIdOf(r), "", kOperator).status == 200);
  REQUIRE(boardState(d, "sim-0") == "recovering");
  d.killAndRestart();
  REQUIRE(boardState(d, "sim-0") == "recovering");
  REQUIRE(d.request("POST", "/v1/leases", acquireBody(1, 60, 0), kPipeline).status == 408);
  // Resumed by the operator: recovering again from now, not available.
  REQUIRE(d.request("POST", "/v1/boards/sim-0/maintenance", "", kOperator).status == 200);
  REQUIRE(d.request("POST", "/v1/boards/sim-0/resume", "", kOperator).status == 200);
  d.killAndRestart();
  REQUIRE(boardState(d, "sim-0") == "recovering");
}

TEST_CASE("a waiting request is granted through its held connection when boards free up") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  auto one = d.request("POST", "/v1/leases", acquireBody(1), kPipeline);
  REQUIRE(one.status == 201);
  // Given a request for both boards waiting (all-or-nothing: it holds none),
  auto waiting = std::async(std::launch::async, [&] {
    return d.request("POST", "/v1/leases", acquireBody(2, 60, 20), kPipeline2, 30);
  });
  waitWhile([&] { return queueDepth(d) == 0; }, 2s);
  REQUIRE(queueDepth(d) == 1);
  REQUIRE(boardState(d, "sim-1") == "available");
  auto queue = parse(d.get("/v1/queue", kViewer)).at("queue").at(0);
  REQUIRE(queue.at("position").as_int64() == 1);
  REQUIRE(queue.at("count").as_int64() == 2);
  REQUIRE(queue.at("holder").at("principal").as_string() == "pipeline2");
  // when the first lease is released, the waiter gets both boards.
  REQUIRE(d.request("DELETE", "/v1/leases/" + leaseIdOf(one), "", kPipeline).status == 200);
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  auto granted = waiting.get();
  REQUIRE(granted.status == 201);
  REQUIRE(parse(granted).at("boards").as_array().size() == 2);
  REQUIRE(queueDepth(d) == 0);
}

TEST_CASE("no board within wait_s is 408 with the queue position") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1));
  auto held = d.request("POST", "/v1/leases", acquireBody(1), kPipeline);
  REQUIRE(held.status == 201);
  // Given one request waiting for the leased board,
  auto first = std::async(std::launch::async,
                          [&] { return d.request("POST", "/v1/leases", acquireBody(1, 60, 20), kPipeline, 30); });
  waitWhile([&] { return queueDepth(d) == 0; }, 2s);
  REQUIRE(queueDepth(d) == 1);
  // a second one that will not wait is told it was second in the queue,
  auto second = d.request("POST", "/v1/leases", acquireBody(1, 60, 0), kPipeline2);
  REQUIRE(second.status == 408);
  REQUIRE(parse(second).at("error").as_string() == "wait_timeout");
  REQUIRE(parse(second).at("detail").as_string() == "no matching board was free within wait_s = 0");
  REQUIRE(parse(second).at("queue_position").as_int64() == 2);
  // and leaves it; the first is still waiting and gets the board when it frees up.
  REQUIRE(queueDepth(d) == 1);
  REQUIRE(d.request("DELETE", "/v1/leases/" + leaseIdOf(held), "", kPipeline).status == 200);
  REQUIRE(first.wait_for(10s) == std::future_status::ready);
  REQUIRE(first.get().status == 201);
  REQUIRE(queueDepth(d) == 0);
}

TEST_CASE("a retried request keeps its lease after the tier stops serving its context") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  auto first = d.request("POST", "/v1/leases", acquireBody(1, 60, 0, "pr", "stage-7"), kPipeline);
  REQUIRE(first.status == 201);
  dir.write("fleet.toml", tokenFleet(dir, 2) + "[sla]\npin_tier = 2\n");
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  auto retry = d.request("POST", "/v1/leases", acquireBody(1, 60, 0, "pr", "stage-7"), kPipeline);
  REQUIRE(retry.status == 200);
  REQUIRE(leaseIdOf(retry) == leaseIdOf(first));
  auto fresh = d.request("POST", "/v1/leases", acquireBody(1, 60, 0, "pr", "stage-8"), kPipeline);
  REQUIRE(fresh.status == 409);
  REQUIRE(parse(fresh).at("error").as_string() == "tier_refused");
  // Another principal's identical key is not a retry.
  REQUIRE(d.request("POST", "/v1/leases", acquireBody(1, 60, 0, "pr", "stage-7"), kOperator).status == 409);
}

TEST_CASE("a reload that removes a leased board revokes its lease with a reason") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  auto r = d.request("POST", "/v1/leases", acquireBody(2), kPipeline);
  std::string id = leaseIdOf(r);
  dir.write("fleet.toml", tokenFleet(dir, 1));
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  auto lease = parse(d.get("/v1/leases/" + id, kPipeline));
  REQUIRE(lease.at("state").as_string() == "revoked");
  REQUIRE(lease.at("end_reason").as_string() == "revoked: board sim-1 was removed from the configuration");
  REQUIRE(boardState(d, "sim-0") != "leased");
}

TEST_CASE("a client that hangs up while waiting leaves the queue") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1));
  REQUIRE(d.request("POST", "/v1/leases", acquireBody(1), kPipeline).status == 201);
  // Given a client's 60 s long-poll queued behind that lease,
  Process client({HWFARMCTL_PATH, "--url", d.url(), "--token", kPipeline2, "lease", "acquire", "--type",
                  "mps2-an385", "--wait", "60"},
                 dir.file("client.out"), dir.file("client.err"));
  waitWhile([&] { return queueDepth(d) == 0; }, 10s);
  auto queue = parse(d.get("/v1/queue", kViewer)).at("queue");
  REQUIRE(queue.as_array().size() == 1);
  REQUIRE(queue.at(0).at("holder").at("principal").as_string() == "pipeline2");
  // when the client goes away (its connection closes with it),
  client.signal(SIGKILL);
  REQUIRE(client.wait(10s));
  // the request leaves the queue.
  waitWhile([&] { return queueDepth(d) > 0; }, 10s);
  REQUIRE(queueDepth(d) == 0);
}

TEST_CASE("a board's maintenance survives kill -9") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  REQUIRE(d.request("POST", "/v1/boards/sim-1/maintenance", R"({"reason":"probe swap"})", kOperator).status == 200);
  d.killAndRestart();
  REQUIRE(boardState(d, "sim-1") == "maintenance");
  REQUIRE(boardState(d, "sim-0") == "available");
}

TEST_CASE("a tokens file readable by others stops the daemon from starting") {
  TempDir dir;
  std::string config = tokenFleet(dir, 1);
  std::string path = dir.write("fleet.toml", config);
  ::chmod(dir.file("tokens.toml").c_str(), 0644);
  Process p({HWFARMD_PATH, "--config", path}, dir.file("out"), dir.file("err"), {{"JOURNAL_STREAM", ""}});
  auto status = p.wait(15s);
  REQUIRE((status && status->code == 1));
  REQUIRE(readFile(dir.file("err")).find(dir.file("tokens.toml") + ": tokens file is open to group or others (mode 0644); "
                                                                   "only its owner may read or write it; "
                                                                   "run: chmod go-rwx " + dir.file("tokens.toml")) !=
          std::string::npos);
}

TEST_CASE("after kill -9 a lease keeps holder and expiry and one that ran out meanwhile is expired at start-up") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  auto keep = parse(d.request("POST", "/v1/leases", acquireBody(1, 600), kPipeline));
  auto lapse = parse(d.request("POST", "/v1/leases", acquireBody(1, 0.5), kPipeline2));
  d.process().signal(SIGKILL);
  d.process().wait(10s);
  std::this_thread::sleep_for(800ms); // the short lease runs out while the daemon is down
  d.killAndRestart();
  REQUIRE(d.log().find("lease state restored from " + dir.file("state/hwfarm.db") +
                       ": 1 active lease(s), 1 expired while hwfarmd was down") != std::string::npos);
  auto kept = parse(d.get("/v1/leases/" + std::string(keep.at("id").as_string()), kViewer));
  REQUIRE(kept.at("state").as_string() == "active");
  REQUIRE(kept.at("holder") == keep.at("holder"));
  REQUIRE(kept.at("expires_at") == keep.at("expires_at"));
  REQUIRE(kept.at("boards").at(0).at("name") == keep.at("boards").at(0).at("name"));
  auto lapsed = parse(d.get("/v1/leases/" + std::string(lapse.at("id").as_string()), kViewer));
  REQUIRE(lapsed.at("state").as_string() == "expired");
  REQUIRE(d.get("/metrics", kViewer).body.find("hwfarm_lease_expiries_total{agent=\"test-lab\"} 1\n") !=
          std::string::npos);
  // Its holder cannot renew it; the kept one renews.
  REQUIRE(d.request("POST", "/v1/leases/" + std::string(lapse.at("id").as_string()) + "/renew", "", kPipeline2)
              .status == 409);
  REQUIRE(d.request("POST", "/v1/leases/" + std::string(keep.at("id").as_string()) + "/renew", "", kPipeline)
              .status == 200);
}
