// The lease route handlers called directly (no socket) over a real
// LeaseService and BoardService on a temp state dir: what each answers, and
// what it changes or leaves alone. lease_api_test drives the same routes
// through a real hwfarmd for what needs one: auth, long-poll over a held
// connection, kill -9.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <regex>

#include "tests/support/daemon_harness.h"
#include "tests/support/in_process.h"
#include "tests/support/requests.h"

using namespace hwfarm;
using namespace hwfarm::test;
namespace json = boost::json;
using api::Handlers;

namespace {

std::string idOf(const std::shared_ptr<Recorded>& answer) { return std::string(answer->json().at("id").as_string()); }

std::shared_ptr<Recorded> acquire(InProcess& d, const std::string& body, const Principal& who) {
  return d.call(&Handlers::acquire, httpRequest("POST", "/v1/leases", body), who);
}

// A request that waits (long-poll): started, and the loop run once; not
// answered yet.
std::shared_ptr<Recorded> startWaiting(InProcess& d, const std::string& body, const Principal& who) {
  auto answer = d.start(&Handlers::acquire, httpRequest("POST", "/v1/leases", body), who);
  d.io.poll();
  return answer;
}

std::shared_ptr<Recorded> renew(InProcess& d, const std::string& id, const std::string& body, const Principal& who) {
  return d.call(&Handlers::renew, httpRequest("POST", "/v1/leases/" + id + "/renew", body), who, id);
}

std::shared_ptr<Recorded> release(InProcess& d, const std::string& id, const Principal& who) {
  return d.call(&Handlers::release, httpRequest("DELETE", "/v1/leases/" + id), who, id);
}

std::shared_ptr<Recorded> show(InProcess& d, const std::string& id) {
  return d.call(&Handlers::showLease, httpRequest("GET", "/v1/leases/" + id), callers::viewer, id);
}

std::string boardState(const InProcess& d, const std::string& name) {
  return lease::toString(d.leases->scheduler().board(name)->state);
}

} // namespace

TEST_CASE("a granted lease names its boards and holder and renews and releases") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  // Given a request for both boards, answered once the grant is committed,
  auto r = d.start(&Handlers::acquire, httpRequest("POST", "/v1/leases", acquireBody(2, 30)), callers::pipeline);
  REQUIRE(r->status() == 0);
  d.runUntil(r);
  REQUIRE(r->status() == 201);
  auto lease = r->json();
  REQUIRE(lease.at("state").as_string() == "active");
  REQUIRE(lease.at("holder").at("principal").as_string() == "pipeline");
  REQUIRE(lease.at("holder").at("job").as_string() == "tvm/PR-1");
  REQUIRE(lease.at("ttl_s").as_int64() == 30);
  REQUIRE(lease.at("boards").as_array().size() == 2);
  REQUIRE(lease.at("boards").at(0).at("worker").as_string() == "w0");
  REQUIRE(lease.at("boards").at(0).at("type").as_string() == "mps2-an385");
  std::string id(lease.at("id").as_string());
  REQUIRE(std::regex_match(id, std::regex("[0-9a-f]{32}")));
  REQUIRE(boardState(d, "sim-0") == "leased");
  // it is shown and listed as it was granted,
  REQUIRE(show(d, id)->status() == 200);
  REQUIRE(show(d, id)->json() == lease);
  auto list = d.call(&Handlers::listLeases, httpRequest("GET", "/v1/leases"), callers::viewer);
  REQUIRE(list->json().at("leases") == json::array{lease});

  // renews to a longer TTL,
  std::string expires(lease.at("expires_at").as_string());
  auto renewed = renew(d, id, R"({"ttl_s": 120})", callers::pipeline);
  REQUIRE(renewed->status() == 200);
  REQUIRE(renewed->json().at("ttl_s").as_int64() == 120);
  REQUIRE(std::string(renewed->json().at("expires_at").as_string()) > expires);
  REQUIRE(d.leases->scheduler().lease(id)->ttl_ms == 120000);

  // and releases, freeing its boards.
  auto released = release(d, id, callers::pipeline);
  REQUIRE(released->status() == 200);
  REQUIRE(released->json().at("state").as_string() == "released");
  REQUIRE(boardState(d, "sim-0") == "available");
  // A retried DELETE succeeds and changes nothing; renewing is refused.
  auto again = release(d, id, callers::pipeline);
  REQUIRE(again->status() == 200);
  REQUIRE(again->json() == released->json());
  auto late = renew(d, id, "", callers::pipeline);
  REQUIRE(late->status() == 409);
  REQUIRE(late->json().at("error").as_string() == "not_active");
  REQUIRE(late->json().at("detail").as_string() == "lease " + id + " is released (released)");
  REQUIRE(late->json().at("lease").at("state").as_string() == "released");
  auto all = d.call(&Handlers::listLeases, httpRequest("GET", "/v1/leases?all=1"), callers::viewer);
  REQUIRE(all->json().at("leases").as_array().size() == 1);
  auto active = d.call(&Handlers::listLeases, httpRequest("GET", "/v1/leases"), callers::viewer);
  REQUIRE(active->json().at("leases").as_array().empty());
  // What was answered was committed: a new daemon finds it so.
  d.restart();
  REQUIRE(d.leases->scheduler().lease(id)->state == lease::LeaseState::released);
}

TEST_CASE("bad lease requests get a 400 naming the field and change nothing") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2, "[limits]\nmax_ttl_s = 3600\nmax_wait_s = 600\nmax_count = 4\n"));
  std::vector<std::pair<std::string, std::string>> cases{
      {"{", "malformed JSON: "},
      {"[1]", "expected a JSON object"},
      {R"({"selector":{"type":"mps2-an385"}})", "context: required field is missing"},
      {R"({"context":"manual"})", "selector: required field is missing"},
      {R"({"selector":{},"context":"manual"})", "selector: needs a board type or at least one label"},
      {R"({"selector":{"type":5},"context":"manual"})", "selector.type: expected a string, got an integer"},
      {R"({"selector":{"type":"x","colour":"red"},"context":"manual"})", "selector.colour: unknown field"},
      {R"({"selector":{"labels":["a",7]},"context":"manual"})", "selector.labels: expected non-empty strings"},
      {R"({"selector":{"type":"x"},"context":"manual","count":0})",
       "count: expected an integer from 1 to 4 (limits.max_count), got 0"},
      {R"({"selector":{"type":"x"},"context":"manual","count":"2"})",
       "count: expected an integer from 1 to 4 (limits.max_count), got a string"},
      {R"({"selector":{"type":"x"},"context":"manual","count":1.5})",
       "count: expected an integer from 1 to 4 (limits.max_count), got 1.5E0"},
      {R"({"selector":{"type":"x"},"context":"manual","ttl_s":0})",
       "ttl_s: expected a number above 0 and up to 3600 (limits.max_ttl_s), got 0"},
      {R"({"selector":{"type":"x"},"context":"manual","ttl_s":1e9})",
       "ttl_s: expected a number above 0 and up to 3600 (limits.max_ttl_s), got 1E9"},
      {R"({"selector":{"type":"x"},"context":"manual","wait_s":-1})",
       "wait_s: expected a number from 0 to 600 (limits.max_wait_s), got -1"},
      {R"({"selector":{"type":"x"},"context":"manual","priority":1000})",
       "priority: expected an integer from -100 to 100, got 1000"},
      {R"({"selector":{"type":"x"},"context":"weekly"})",
       "context: expected \"pr\", \"pr-tagged\", \"nightly\" or \"manual\", got \"weekly\""},
      {R"({"selector":{"type":"x"},"context":"manual","holder":{"job":"j","node":"n"}})", "holder.node: unknown field"},
      {R"({"selector":{"type":"x"},"context":"manual","idempotency_key":")" + std::string(200, 'k') + "\"}",
       "idempotency_key: longer than 128 characters"},
      {R"({"selector":{"type":"x"},"context":"manual","lease_time":5})", "lease_time: unknown field"},
  };
  for (const auto& [body, detail] : cases) {
    INFO(body);
    auto r = acquire(d, body, callers::pipeline);
    REQUIRE(r->status() == 400);
    REQUIRE(r->json().at("error").as_string() == "invalid_request");
    REQUIRE_THAT(std::string(r->json().at("detail").as_string()), Catch::StartsWith(detail));
  }
  auto renewed = renew(d, "nope", "{\"ttl_s\":-5}", callers::operator_);
  REQUIRE(renewed->status() == 404);
  REQUIRE(renewed->json() == json::parse(R"({"error":"not_found","detail":"no lease nope"})"));
  // Nothing changed.
  const auto& scheduler = d.leases->scheduler();
  REQUIRE(scheduler.leases().empty());
  REQUIRE(scheduler.queueLength() == 0);
  REQUIRE(boardState(d, "sim-0") == "available");
  REQUIRE(d.leases->metrics().grants == 0);
}

// Issue 9, item 12: duplicate keys were accepted, the last one winning.
TEST_CASE("a request body with a repeated key is 400 naming it and changes nothing") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 1));
  auto r = acquire(d, R"({"selector":{"type":"mps2-an385"},"context":"weekly","context":"manual"})", callers::pipeline);
  REQUIRE(r->status() == 400);
  REQUIRE(r->json() == json::parse(R"({"error":"invalid_request","detail":"context: duplicate field"})"));
  r = acquire(d,
              R"({"selector":{"type":"mps2-an385"},"context":"manual","ttl_s":600,"holder":{"job":"j","build":"1"},)"
              R"("holder":{"job":"a","job":"b"}})",
              callers::pipeline);
  REQUIRE(r->status() == 400);
  REQUIRE(r->json().at("detail").as_string() == "holder: duplicate field");
  REQUIRE(d.leases->scheduler().leases().empty());
}

// Issue 9, item 8: "retry\u0000-7" was stored as "retry"; after a restart
// the retry got a second lease.
TEST_CASE("a NUL or control character in an identifier is 400 naming the field and nothing is stored") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto withKey = [](const std::string& key) {
    return R"({"selector":{"type":"mps2-an385"},"context":"manual","idempotency_key":")" + key + "\"}";
  };
  struct Case {
    std::string body, detail;
  };
  std::vector<Case> cases{
      {withKey("retry\\u0000-7"), "idempotency_key: contains the control character U+0000 at byte 5"},
      {withKey("retry\\u001b[2J"), "idempotency_key: contains the control character U+001B at byte 5"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    auto r = acquire(d, c.body, callers::pipeline);
    REQUIRE(r->status() == 400);
    REQUIRE(r->json().at("detail").as_string() ==
            c.detail + " (control characters U+0000-U+001F and U+007F are not allowed)");
  }
  auto r = acquire(d, R"({"selector":{"type":"mps2-an385"},"context":"manual","holder":{"job":"j\u0000x"}})",
                   callers::pipeline);
  REQUIRE(r->status() == 400);
  REQUIRE(r->json().at("detail").as_string().starts_with("holder.job: contains the control character U+0000"));
  // Nothing was granted, queued or stored: not even after a restart.
  REQUIRE(d.leases->scheduler().leases().empty());
  REQUIRE(d.leases->scheduler().queueLength() == 0);
  d.restart();
  REQUIRE(d.leases->scheduler().leases().empty());
}

TEST_CASE("a retried request with the same idempotency key returns the same lease") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto first = acquire(d, acquireBody(1, 60, 0, "manual", "jenkins-42-hw"), callers::pipeline);
  auto retry = acquire(d, acquireBody(1, 60, 0, "manual", "jenkins-42-hw"), callers::pipeline);
  REQUIRE(first->status() == 201);
  REQUIRE(retry->status() == 200);
  REQUIRE(idOf(first) == idOf(retry));
  REQUIRE(d.leases->scheduler().activeLeaseCount() == 1);
  // Another holder's key is its own.
  auto other = acquire(d, acquireBody(1, 60, 0, "manual", "jenkins-42-hw"), callers::pipeline2);
  REQUIRE(other->status() == 201);
  REQUIRE(idOf(other) != idOf(first));
  REQUIRE(d.leases->scheduler().activeLeaseCount() == 2);
}

TEST_CASE("a selector no configured board can match is 422 at once") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto r = acquire(d, R"({"selector":{"type":"nucleo-f429zi","labels":["stm32"]},"context":"manual","wait_s":60})",
                   callers::pipeline);
  REQUIRE(r->status() == 422);
  REQUIRE(r->json().at("error").as_string() == "unsatisfiable");
  // The detail says which types there are (the closest first; none is close enough to suggest).
  REQUIRE(r->json().at("detail").as_string() ==
          "selector type=nucleo-f429zi labels=stm32 matches 0 configured board(s), 1 requested; no configured board "
          "has type \"nucleo-f429zi\" (configured types: mps2-an385)");
  REQUIRE(r->json().at("selector").at("type").as_string() == "nucleo-f429zi");
  REQUIRE(r->json().at("configured_types") == json::parse(R"(["mps2-an385"])"));
  auto three = acquire(d, acquireBody(3, 60, 60), callers::pipeline);
  REQUIRE(three->status() == 422);
  auto worker = acquire(d, R"({"selector":{"type":"mps2-an385","worker":"w7"},"context":"manual"})", callers::pipeline);
  REQUIRE(worker->status() == 422);
  REQUIRE(worker->json().at("detail").as_string() ==
          "no configured worker or Jenkins node is named \"w7\"; did you mean \"w0\"? (workers: w0)");
  // None of them waits.
  REQUIRE(d.leases->scheduler().queueLength() == 0);
  REQUIRE(d.leases->scheduler().leases().empty());
}

TEST_CASE("a context the effective tier does not serve is refused with 409 at once") {
  TempDir dir;
  InProcess d(parseFleet(std::regex_replace(qemuFleet(dir.file("state"), 1), std::regex("tier = 1"), "tier = 2")));
  auto r = acquire(d, acquireBody(1, 60, 60, "pr"), callers::pipeline);
  REQUIRE(r->status() == 409);
  auto body = r->json();
  REQUIRE(body.at("error").as_string() == "tier_refused");
  REQUIRE(body.at("effective_tier").as_int64() == 2);
  REQUIRE(body.at("registered_tier").as_int64() == 2);
  REQUIRE_THAT(std::string(body.at("since").as_string()), Catch::Matches("[0-9-]+T[0-9:.]+Z"));
  // The reason is the SLA service's: a fresh agent serves its registered tier.
  REQUIRE(body.at("reason").as_string() == "registered tier 2");
  REQUIRE(body.at("detail").as_string() == "registered tier 2; tier 2 does not take \"pr\" requests");
  REQUIRE(d.leases->scheduler().queueLength() == 0);
  REQUIRE(d.leases->scheduler().leases().empty());
  REQUIRE(acquire(d, acquireBody(1, 60, 0, "pr-tagged"), callers::pipeline)->status() == 201);
}

TEST_CASE("a retry is not refused by a tier that stopped serving its context since it was admitted") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto first = acquire(d, acquireBody(1, 60, 0, "pr", "stage-7"), callers::pipeline);
  REQUIRE(first->status() == 201);
  // Given the effective tier falls to 2 (which takes no "pr" requests),
  d.state.effective_tier = 2;
  // the retry gets its lease, a fresh key is refused, and so is another
  // principal's identical key.
  auto retry = acquire(d, acquireBody(1, 60, 0, "pr", "stage-7"), callers::pipeline);
  REQUIRE(retry->status() == 200);
  REQUIRE(idOf(retry) == idOf(first));
  auto fresh = acquire(d, acquireBody(1, 60, 0, "pr", "stage-8"), callers::pipeline);
  REQUIRE(fresh->status() == 409);
  REQUIRE(fresh->json().at("error").as_string() == "tier_refused");
  REQUIRE(acquire(d, acquireBody(1, 60, 0, "pr", "stage-7"), callers::operator_)->status() == 409);
  REQUIRE(d.leases->scheduler().activeLeaseCount() == 1);
}

TEST_CASE("only the holder or an operator renews or releases a lease") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  std::string id = idOf(acquire(d, acquireBody(1, 60), callers::pipeline));
  int64_t expiry = d.leases->scheduler().lease(id)->expires_ms;
  // Another pipeline may neither renew nor release it: 403, and the lease
  // stays as it was.
  for (const auto& r : {renew(d, id, R"({"ttl_s": 600})", callers::pipeline2), release(d, id, callers::pipeline2)}) {
    REQUIRE(r->status() == 403);
    REQUIRE(r->json() == json::parse(R"({"error":"forbidden","detail":"lease )" + id +
                                    R"( belongs to \"pipeline\""})"));
  }
  REQUIRE(d.leases->scheduler().lease(id)->state == lease::LeaseState::active);
  REQUIRE(d.leases->scheduler().lease(id)->expires_ms == expiry);
  REQUIRE(d.leases->scheduler().lease(id)->ttl_ms == 60000);
  // An operator renews it, and its DELETE is a revocation with a reason.
  REQUIRE(renew(d, id, R"({"ttl_s": 600})", callers::operator_)->status() == 200);
  REQUIRE(d.leases->scheduler().lease(id)->ttl_ms == 600000);
  auto revoked = release(d, id, callers::operator_);
  REQUIRE(revoked->status() == 200);
  REQUIRE(revoked->json().at("state").as_string() == "revoked");
  REQUIRE(revoked->json().at("end_reason").as_string() == "revoked: force-released by operator \"operator\"");
  REQUIRE(d.leases->metrics().revocations == 1);
  // A renew body out of range is 400 and leaves the TTL alone.
  std::string other = idOf(acquire(d, acquireBody(1, 60), callers::pipeline));
  auto bad = renew(d, other, R"({"ttl_s": -5})", callers::pipeline);
  REQUIRE(bad->status() == 400);
  REQUIRE(bad->json().at("error").as_string() == "invalid_request");
  REQUIRE(d.leases->scheduler().lease(other)->ttl_ms == 60000);
}

TEST_CASE("a waiting request is queued and granted when boards free up") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  std::string one = idOf(acquire(d, acquireBody(1), callers::pipeline));
  // Given a request for both boards waiting (all-or-nothing: it holds none),
  auto waiting = startWaiting(d, acquireBody(2, 60, 20), callers::pipeline2);
  REQUIRE(waiting->status() == 0);
  REQUIRE(waiting->gone_hook); // it watches for its client leaving
  REQUIRE(boardState(d, "sim-1") == "available");
  auto queue = d.call(&Handlers::queue, httpRequest("GET", "/v1/queue"), callers::viewer);
  REQUIRE(queue->status() == 200);
  auto entries = queue->json().at("queue");
  REQUIRE(entries.as_array().size() == 1);
  REQUIRE(entries.at(0).at("position").as_int64() == 1);
  REQUIRE(entries.at(0).at("count").as_int64() == 2);
  REQUIRE(entries.at(0).at("holder").at("principal").as_string() == "pipeline2");
  // when the first lease is released, the waiter gets both boards.
  REQUIRE(release(d, one, callers::pipeline)->status() == 200);
  d.runUntil(waiting);
  REQUIRE(waiting->status() == 201);
  REQUIRE(waiting->json().at("boards").as_array().size() == 2);
  REQUIRE(d.leases->scheduler().queueLength() == 0);
}

TEST_CASE("a waiting request whose client leaves is withdrawn from the queue") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 1));
  std::string one = idOf(acquire(d, acquireBody(1), callers::pipeline));
  auto waiting = startWaiting(d, acquireBody(1, 60, 60), callers::pipeline2);
  REQUIRE(d.leases->scheduler().queueLength() == 1);
  // When its client goes (the server runs the hook it registered),
  waiting->hangUp();
  // the request leaves the queue, and the freed board is not granted to it.
  REQUIRE(d.leases->scheduler().queueLength() == 0);
  REQUIRE(release(d, one, callers::pipeline)->status() == 200);
  d.io.poll();
  REQUIRE(boardState(d, "sim-0") == "available");
  REQUIRE(d.leases->scheduler().activeLeaseCount() == 0);
}

// Issue 9, item 10: invalid UTF-8 from a URL was echoed raw inside JSON.
TEST_CASE("invalid UTF-8 and long paths in a URL come back as valid JSON, cut") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 1));
  // An unknown path, through the router: Boost.JSON refuses invalid UTF-8,
  // so each body parses only if it is valid.
  auto bytes = d.send("GET", "/v1/\xff\xfe\xc3");
  REQUIRE(bytes->status() == 404);
  REQUIRE(bytes->json().at("detail").as_string() == "no such endpoint: /v1/\\xff\\xfe\\xc3");
  auto r = d.send("GET", "/v1/" + std::string(10000, 'p'));
  REQUIRE(r->status() == 404);
  REQUIRE(r->json().at("detail").as_string() ==
          "no such endpoint: /v1/" + std::string(124, 'p') + "\xe2\x80\xa6 (10004 bytes)");
  // A lease id of invalid UTF-8, and a long one.
  auto id = show(d, "\xc0\xaf");
  REQUIRE(id->status() == 404);
  REQUIRE(id->json().at("detail").as_string() == "no lease \\xc0\\xaf");
  auto gone = release(d, std::string(200, 'x'), callers::operator_);
  REQUIRE(gone->status() == 404);
  REQUIRE(gone->json().at("detail").as_string() == "no lease " + std::string(128, 'x') + "\xe2\x80\xa6 (200 bytes)");
}

TEST_CASE("the router counts the answers it sent by status for /metrics") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 1));
  // Given two refused requests and a grant through the router,
  REQUIRE(d.send("POST", "/v1/leases", "{")->status() == 400);
  REQUIRE(d.send("POST", "/v1/leases", "[1]")->status() == 400);
  REQUIRE(d.send("POST", "/v1/leases", acquireBody())->status() == 201);
  // /metrics shows them, and the grant.
  auto metrics = d.send("GET", "/metrics")->body();
  REQUIRE(metrics.find("hwfarm_http_responses_total{agent=\"test-lab\",code=\"400\"} 2\n") != std::string::npos);
  REQUIRE(metrics.find("hwfarm_http_responses_total{agent=\"test-lab\",code=\"201\"} 1\n") != std::string::npos);
  REQUIRE(metrics.find("hwfarm_lease_grants_total{agent=\"test-lab\"} 1\n") != std::string::npos);
}
