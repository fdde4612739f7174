// The tier SLA routes through the router, in process (no socket), over the
// real lease and SLA services on a temp state dir: GET /v1/sla and
// /v1/tier, pin and unpin, the 409 a pin makes, /metrics. sla_api_test
// drives them through a real hwfarmd (tokens and roles, a restart, the
// demotion by a run's infrastructure failure, hwfarmctl).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <regex>

#include "tests/support/daemon_harness.h"
#include "tests/support/in_process.h"
#include "tests/support/requests.h"

using namespace hwfarm;
using namespace hwfarm::test;
namespace json = boost::json;

namespace {

std::string str(const json::value& v) { return std::string(v.as_string()); }

// The value of the metric line starting with `prefix` (name and labels).
std::string metric(InProcess& d, const std::string& prefix) {
  std::string text = d.send("GET", "/metrics")->body();
  size_t at = text.find("\n" + prefix + " ");
  if (at == std::string::npos) return "(missing)";
  size_t start = at + prefix.size() + 2;
  return text.substr(start, text.find('\n', start) - start);
}

// Runs the loop until the SLA service has `n` open incidents (2 s at most).
void waitIncidents(InProcess& d, size_t n) {
  REQUIRE(runLoopUntil(d.io, [&] { return d.sla->policy().incidents().open().size() == n; }, std::chrono::seconds(2)));
}

} // namespace

TEST_CASE("sla routes: a fresh agent stands at its registered tier with nothing ahead") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto sla = d.send("GET", "/v1/sla");
  REQUIRE(sla->status() == 200);
  json::object o = sla->json().as_object();
  REQUIRE(o.at("registered_tier").as_int64() == 1);
  REQUIRE(o.at("effective_tier").as_int64() == 1);
  REQUIRE(o.at("policy_tier").as_int64() == 1);
  REQUIRE(o.at("pinned_tier").is_null());
  REQUIRE(str(o.at("reason")) == "registered tier 1");
  REQUIRE(o.at("incidents").as_array().empty());
  REQUIRE(o.at("seconds_to_demotion").is_null());
  REQUIRE(o.at("demotion_at").is_null());
  REQUIRE(str(o.at("warning")).empty());
  json::object ratio = o.at("ratio").as_object();
  REQUIRE(ratio.at("runs").as_int64() == 0);
  REQUIRE(ratio.at("max").as_double() == 0.2);
  REQUIRE(ratio.at("min_runs").as_int64() == 10);
  REQUIRE(ratio.at("window_s").as_double() == 86400);

  auto tier = d.send("GET", "/v1/tier");
  REQUIRE(tier->status() == 200);
  json::object t = tier->json().as_object();
  REQUIRE(t.at("registered_tier").as_int64() == 1);
  REQUIRE(t.at("effective_tier").as_int64() == 1);
  REQUIRE(t.at("pinned").is_null());
  REQUIRE(t.at("transitions").as_array().empty());
  REQUIRE(metric(d, "hwfarm_sla_time_to_demotion_seconds{agent=\"test-lab\"}") == "+Inf");
  REQUIRE(metric(d, "hwfarm_tier{agent=\"test-lab\",kind=\"pinned\"}") == "0");
  REQUIRE(d.send("POST", "/v1/sla")->status() == 405);
  REQUIRE(d.send("GET", "/v1/tier/pin")->status() == 405);
}

TEST_CASE("sla routes: an infrastructure failure the lease service records is an incident counting down to the demotion") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  // Given the lease service records a flash timeout on sim-0 (as it does
  // for a run's attempt),
  d.leases->recordInfrastructureFailure("", "sim-0", "flash timeout");
  waitIncidents(d, 1);
  json::object o = d.send("GET", "/v1/sla")->json().as_object();
  json::array incidents = o.at("incidents").as_array();
  REQUIRE(incidents.size() == 1);
  json::object i = incidents[0].as_object();
  REQUIRE(str(i.at("scope")) == "board");
  REQUIRE(str(i.at("subject")) == "sim-0");
  REQUIRE(str(i.at("description")) == "sim-0 (flash timeout)");
  REQUIRE(i.at("unresolved").as_array() == json::array{"sim-0"});
  REQUIRE(i.at("window_s").as_double() == 86400);
  REQUIRE(i.at("age_s").as_double() >= 0);
  REQUIRE(i.at("age_s").as_double() < 60);
  // the standing counts down to its deadline,
  double left = o.at("seconds_to_demotion").as_double();
  REQUIRE(left <= 86400);
  REQUIRE(left > 86400 - 60);
  REQUIRE(o.at("demotion_at") == i.at("demotes_at"));
  // (cut, not rounded: 24 h 0 m only within the failure's millisecond)
  std::string left_text = o.at("ms_to_demotion").as_int64() == 86400000 ? "24 h 0 m" : "23 h 59 m";
  REQUIRE(str(o.at("warning")) == "tier 1 → 2 in " + left_text + " unless sim-0 recovers");
  // and so does /metrics.
  double metric_left = std::stod(metric(d, "hwfarm_sla_time_to_demotion_seconds{agent=\"test-lab\"}"));
  REQUIRE(metric_left <= left);
  REQUIRE(metric_left > 86400 - 60);
  REQUIRE(metric(d, "hwfarm_sla_open_incidents{agent=\"test-lab\"}") == "1");
  // A failure of no board (the reference simulator's) opens nothing more.
  d.leases->recordInfrastructureFailure("", "", "reference simulator crashed");
  d.io.restart();
  d.io.run_for(std::chrono::milliseconds(100));
  REQUIRE(d.sla->policy().incidents().open().size() == 1);
}

TEST_CASE("sla routes: a board that vanishes while leased is an incident against it") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto granted = d.send("POST", "/v1/leases", acquireBody(2, 60));
  REQUIRE(granted->status() == 201);
  d.leases->presence("sim-1", false);
  waitIncidents(d, 1);
  json::object i = d.send("GET", "/v1/sla")->json().at("incidents").at(0).as_object();
  REQUIRE(str(i.at("description")) == "sim-1 (board vanished while leased)");
  // A board that goes while unleased is no infrastructure failure.
  REQUIRE(d.send("DELETE", "/v1/leases/" + str(granted->json().at("id")))->status() == 200);
  d.leases->presence("sim-0", false);
  d.io.restart();
  d.io.run_for(std::chrono::milliseconds(100));
  REQUIRE(d.sla->policy().incidents().open().size() == 1);
}

TEST_CASE("sla routes: a pin refuses the contexts its tier does not serve with the pin's reason and survives a restart") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto pinned = d.send("POST", "/v1/tier/pin", R"({"tier": 2, "reason": "lab move"})");
  REQUIRE(pinned->status() == 200);
  json::object p = pinned->json().as_object();
  std::string reason = str(p.at("transition").at("reason"));
  REQUIRE_THAT(reason, Catch::Matches("pinned to tier 2 at [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z by anonymous: lab move"));
  REQUIRE(p.at("effective_tier").as_int64() == 2);
  REQUIRE(str(p.at("pinned").at("by")) == "anonymous");
  REQUIRE(str(p.at("pinned").at("reason")) == "lab move");
  REQUIRE(d.state.effective_tier == 2);

  // A pr request is refused at once with the reason and since when,
  auto refused = d.send("POST", "/v1/leases", acquireBody(1, 60, 0, "pr"));
  REQUIRE(refused->status() == 409);
  json::object r = refused->json().as_object();
  REQUIRE(str(r.at("error")) == "tier_refused");
  REQUIRE(str(r.at("reason")) == reason);
  REQUIRE(str(r.at("detail")) == reason + "; tier 2 does not take \"pr\" requests");
  REQUIRE(r.at("effective_tier").as_int64() == 2);
  REQUIRE(r.at("since") == p.at("since"));
  // while a pr-tagged one is served.
  REQUIRE(d.send("POST", "/v1/leases", acquireBody(1, 60, 0, "pr-tagged"))->status() == 201);
  REQUIRE(metric(d, "hwfarm_tier{agent=\"test-lab\",kind=\"pinned\"}") == "2");
  REQUIRE(metric(d, "hwfarm_tier{agent=\"test-lab\",kind=\"effective\"}") == "2");
  REQUIRE(metric(d, "hwfarm_sla_transitions_total{agent=\"test-lab\",kind=\"pinned\"}") == "1");

  // A restart (a new daemon on the same state dir) keeps the pin and its history.
  d.restart();
  REQUIRE(d.state.effective_tier == 2);
  REQUIRE(d.state.tier_reason == reason);
  json::object t = d.send("GET", "/v1/tier")->json().as_object();
  REQUIRE(t.at("effective_tier").as_int64() == 2);
  REQUIRE(str(t.at("reason")) == reason);
  REQUIRE(t.at("transitions").as_array().size() == 1);
  REQUIRE(str(t.at("transitions").at(0).at("kind")) == "pinned");

  auto unpinned = d.send("POST", "/v1/tier/unpin", R"({"reason": "moved"})");
  REQUIRE(unpinned->status() == 200);
  REQUIRE(unpinned->json().at("effective_tier").as_int64() == 1);
  REQUIRE(unpinned->json().at("transitions").as_array().size() == 2);
  REQUIRE(str(unpinned->json().at("transitions").at(0).at("kind")) == "unpinned"); // newest first
  REQUIRE(d.send("POST", "/v1/leases", acquireBody(1, 60, 0, "pr"))->status() == 201);
  auto again = d.send("POST", "/v1/tier/unpin");
  REQUIRE(again->status() == 409);
  REQUIRE(str(again->json().at("error")) == "not_pinned");
}

TEST_CASE("sla routes: a bad pin request is 400 with the reason and changes nothing") {
  TempDir dir;
  InProcess d(parseFleet(std::regex_replace(qemuFleet(dir.file("state"), 1), std::regex("tier = 1"), "tier = 2")));
  auto detail = [&](const std::string& body) {
    auto r = d.send("POST", "/v1/tier/pin", body);
    REQUIRE(r->status() == 400);
    return str(r->json().at("detail"));
  };
  REQUIRE(detail(R"({"tier": 0, "reason": "x"})") == "tier: expected an integer from 1 to 3, got 0");
  REQUIRE(detail(R"({"tier": 3})") == "reason: required: say why the tier is pinned");
  REQUIRE(detail(R"({"reason": "x"})") == "tier: required field is missing");
  REQUIRE(detail(R"({"tier": 3, "reason": "x", "for": "ever"})").find("for") != std::string::npos);
  REQUIRE(detail(R"({"tier": 1, "reason": "x"})") == "cannot pin tier 1, above the registered tier 2");
  REQUIRE(d.send("GET", "/v1/tier")->json().at("transitions").as_array().empty());
  REQUIRE(d.state.effective_tier == 2);
}
