// The tier SLA through a real hwfarmd (issue 12): a run's infrastructure
// failure left unresolved demotes the agent (a resolution window of seconds
// in [sla.tier1]), a lease its tier no longer serves is refused with the
// reason and hwfarmctl exits with its refused code, a pin needs the
// operator role, and a kill -9 and restart keep the tier and its history.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include <boost/json.hpp>

#include "daemon/api/json_codec.h"
#include "daemon/cli/http_client.h"
#include "daemon/services/system_clock.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

const std::string kViewer = "secret-viewer", kPipeline = "secret-pipeline", kOperator = "secret-operator";

std::string str(const json::value& v) { return std::string(v.as_string()); }
json::value parsed(const hwfarm::cli::HttpResult& r) { return json::parse(r.body); }

CommandResult ctl(const RunningDaemon& d, const std::string& token, std::vector<std::string> args) {
  args.insert(args.begin(), HWFARMCTL_PATH);
  return runCommand(args,
                    {{"HWFARM_URL", d.url()}, {"HWFARM_TOKEN", token}, {"CHANGE_ID", ""}, {"HWFARM_CONTEXT", ""},
                     {"HWFARM_WORKER", ""}, {"JOB_NAME", "tvm/PR-7"}, {"BUILD_NUMBER", "3"}, {"STAGE_NAME", "hw"}},
                    60s);
}

// Runs `variant`'s test image on the lease's boards; the run's record once it ended.
std::string uploadVariant(const RunningDaemon& d, const std::string& lease, const std::string& variant) {
  std::string image = readFile(std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf");
  auto up = hwfarm::cli::HttpClient(d.url()).request("POST", "/v1/leases/" + lease + "/images?name=" + variant + ".elf",
                                                     image, kPipeline, "application/octet-stream");
  INFO(up.body);
  REQUIRE(up.status == 201);
  return str(parsed(up).at("image"));
}

// Runs `variant` on the lease's board: without a reference, or against the
// QEMU reference running `reference` (another variant).
json::object runImage(const RunningDaemon& d, const std::string& lease, const std::string& variant,
                      const std::string& reference = "") {
  std::string image = uploadVariant(d, lease, variant);
  std::string body = R"({"images":[{"image":")" + image + R"(","name":")" + variant + R"(.elf")" +
                     (reference.empty() ? R"(}],"reference":"none"})"
                                        : R"(,"reference_image":")" + uploadVariant(d, lease, reference) + R"("}]})");
  auto started = d.request("POST", "/v1/leases/" + lease + "/runs", body, kPipeline);
  INFO(started.body);
  REQUIRE(started.status == 201);
  std::string id = str(parsed(started).at("id"));
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < deadline) {
    json::object run = parsed(d.get("/v1/runs/" + id, kViewer)).as_object();
    if (str(run.at("state")) != "running") return run;
    std::this_thread::sleep_for(50ms);
  }
  FAIL("run " << id << " did not end");
  return {};
}

// Leases the one board, for 10 minutes; the lease's id.
std::string leaseBoard(const RunningDaemon& d) {
  auto lease = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","ttl_s":600})",
                         kPipeline);
  REQUIRE(lease.status == 201);
  return str(parsed(lease).at("id"));
}

json::object tier(const RunningDaemon& d) { return parsed(d.get("/v1/tier", kViewer)).as_object(); }
json::object standing(const RunningDaemon& d) { return parsed(d.get("/v1/sla", kViewer)).as_object(); }

} // namespace

TEST_CASE("sla api: an unresolved infrastructure failure demotes the agent and refuses pr leases with the reason and a restart keeps it") {
  TempDir dir;
  // Tier 1 resolves an infrastructure failure within 7.2 s here (24 h by default).
  RunningDaemon d(dir, tokenFleet(dir, 1) + "[sla.tier1]\nresolution_window_h = 0.002\n");
  std::string lease_id = leaseBoard(d);

  // Given a run whose console record is corrupted on the wire on the only
  // board while the reference printed its records whole (the lab's failure),
  json::object run = runImage(d, lease_id, "crc", "pass");
  REQUIRE(str(run.at("state")) == "error");
  // the SLA holds an incident against sim-0 and warns before it demotes;
  json::object before;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  do {
    before = standing(d);
  } while (before.at("incidents").as_array().empty() && std::chrono::steady_clock::now() < deadline);
  INFO(json::serialize(before));
  REQUIRE(before.at("incidents").as_array().size() == 1);
  REQUIRE(str(before.at("incidents").at(0).at("subject")) == "sim-0");
  REQUIRE(before.at("incidents").at(0).at("window_s").as_double() == 7.2);
  if (before.at("effective_tier").as_int64() == 1) { // not yet at the window
    REQUIRE(before.at("seconds_to_demotion").as_double() <= 7.2);
    REQUIRE_THAT(str(before.at("warning")), Catch::StartsWith("tier 1 → 2 in ") && Catch::EndsWith(" s unless sim-0 recovers"));
  }
  // unresolved for the window, the agent is demoted by itself.
  json::object t;
  deadline = std::chrono::steady_clock::now() + 20s;
  do {
    std::this_thread::sleep_for(100ms);
    t = tier(d);
  } while (t.at("effective_tier").as_int64() == 1 && std::chrono::steady_clock::now() < deadline);
  INFO(json::serialize(t));
  REQUIRE(t.at("effective_tier").as_int64() == 2);
  std::string reason = str(t.at("reason"));
  REQUIRE_THAT(reason, Catch::Matches("demoted to tier 2 at [0-9T:-]+Z: infrastructure failure on sim-0 \\(.*CRC "
                                      "mismatch.*\\) unresolved for 7s"));
  REQUIRE(t.at("transitions").as_array().size() == 1);
  REQUIRE(d.log().find("SLA: " + reason) != std::string::npos);
  auto status = ctl(d, kViewer, {"status"});
  REQUIRE(status.out.find("tier:       2 (registered 1, since ") != std::string::npos);
  REQUIRE(status.out.find("            " + reason + "\n") != std::string::npos);

  // A pr lease is refused at once: 409 with the reason and since when,
  auto refused = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"pr"})", kPipeline);
  REQUIRE(refused.status == 409);
  REQUIRE(str(parsed(refused).at("error")) == "tier_refused");
  REQUIRE(str(parsed(refused).at("reason")) == reason);
  REQUIRE(parsed(refused).at("since") == t.at("since"));
  // and hwfarmctl prints it and exits with the refused code (5), for
  // `lease acquire` and `lease run` alike.
  for (std::vector<std::string> args :
       {std::vector<std::string>{"lease", "acquire", "--type", "mps2-an385", "--context", "pr"},
        std::vector<std::string>{"lease", "run", "--type", "mps2-an385", "--context", "pr", "--", "/bin/true"}}) {
    auto r = ctl(d, kPipeline, args);
    INFO(r.err);
    REQUIRE(r.status.code == 5);
    REQUIRE(r.err.find(reason + "; tier 2 does not take \"pr\" requests") != std::string::npos);
  }

  // An operator pins tier 3 (a pipeline may not),
  REQUIRE(ctl(d, kPipeline, {"tier", "pin", "3", "--reason", "drill"}).status.code == 7);
  auto pin = ctl(d, kOperator, {"tier", "pin", "3", "--reason", "lab drill"});
  INFO(pin.err);
  REQUIRE(pin.status.code == 0);
  REQUIRE_THAT(pin.out, Catch::Matches("pinned to tier 3 at [0-9T:-]+Z by operator: lab drill\n"));

  // and after kill -9 and a restart the tiers, the pin and the history are
  // as they were, the incident still open.
  d.killAndRestart();
  json::object after = tier(d);
  INFO(json::serialize(after));
  REQUIRE(after.at("effective_tier").as_int64() == 3);
  REQUIRE(after.at("policy_tier").as_int64() == 2);
  REQUIRE(str(after.at("pinned").at("by")) == "operator");
  REQUIRE(after.at("transitions").as_array().size() == 2);
  REQUIRE(str(after.at("transitions").at(0).at("kind")) == "pinned");
  REQUIRE(str(after.at("transitions").at(1).at("reason")) == reason);
  json::object sla = standing(d);
  REQUIRE(sla.at("incidents").as_array().size() == 1);
  REQUIRE(str(sla.at("warning")) == str(after.at("reason"))); // while pinned: the pin's reason
  auto shown = ctl(d, kViewer, {"sla"});
  REQUIRE(shown.status.code == 0);
  REQUIRE(shown.out.find("effective tier 3 (registered 1, policy 2, pinned 3)") != std::string::npos);
  REQUIRE(shown.out.find("sim-0") != std::string::npos);
  auto history = ctl(d, kViewer, {"tier"});
  REQUIRE(history.status.code == 0);
  REQUIRE(history.out.find(reason) != std::string::npos);
  REQUIRE(history.out.find("pinned by operator at ") != std::string::npos);

  // A passing run on sim-0 resolves the incident; unpinned, the policy's tier 2 serves.
  REQUIRE(str(runImage(d, lease_id, "pass").at("state")) == "passed");
  REQUIRE(standing(d).at("incidents").as_array().empty());
  auto unpin = ctl(d, kOperator, {"tier", "unpin", "--reason", "drill over"});
  REQUIRE(unpin.status.code == 0);
  REQUIRE_THAT(unpin.out, Catch::EndsWith("by operator: drill over; serving tier 2 (policy)\n"));
  REQUIRE(tier(d).at("effective_tier").as_int64() == 2);
}

TEST_CASE("sla api: reading the standing needs a token and pinning the operator role") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1));
  REQUIRE(d.get("/v1/sla").status == 401);
  REQUIRE(d.get("/v1/tier").status == 401);
  REQUIRE(d.get("/v1/sla", kViewer).status == 200);
  for (const auto& token : {kViewer, kPipeline}) {
    auto r = d.request("POST", "/v1/tier/pin", R"({"tier":2,"reason":"x"})", token);
    REQUIRE(r.status == 403);
    REQUIRE(d.request("POST", "/v1/tier/unpin", "", token).status == 403);
  }
  REQUIRE(tier(d).at("transitions").as_array().empty());
  auto pinned = d.request("POST", "/v1/tier/pin", R"({"tier":2,"reason":"lab move"})", kOperator);
  REQUIRE(pinned.status == 200);
  REQUIRE(str(parsed(pinned).at("pinned").at("by")) == "operator");
  std::string metrics = d.get("/metrics", kViewer).body;
  REQUIRE(metrics.find("hwfarm_tier{agent=\"test-lab\",kind=\"pinned\"} 2\n") != std::string::npos);
  REQUIRE(metrics.find("hwfarm_sla_transitions_total{agent=\"test-lab\",kind=\"pinned\"} 1\n") != std::string::npos);
  REQUIRE(metrics.find("hwfarm_sla_time_to_demotion_seconds{agent=\"test-lab\"} +Inf\n") != std::string::npos);
  // Unknown options and a tier that is not one are usage errors.
  REQUIRE(ctl(d, kOperator, {"tier", "pin", "9", "--reason", "x"}).status.code == 2);
  REQUIRE(ctl(d, kOperator, {"tier", "pin", "3"}).status.code == 2);
  REQUIRE(ctl(d, kOperator, {"sla", "extra"}).status.code == 2);
}

TEST_CASE("sla api: status tier and sla show since when the tier holds: the agent's start, or nothing when unknown") {
  // Given a fresh agent that never changed tier,
  TempDir dir;
  std::string before = hwfarm::api::rfc3339(hwfarm::SystemClock().wallMs());
  RunningDaemon d(dir, tokenFleet(dir, 1));
  // its tier holds since its history started: at its first start, not in 1970,
  std::string since = str(tier(d).at("since"));
  CHECK(since >= before);
  CHECK(since <= hwfarm::api::rfc3339(hwfarm::SystemClock().wallMs()));
  CHECK(str(standing(d).at("since")) == since);
  CHECK(str(parsed(d.get("/v1/healthz")).at("tier_since")) == since);
  // and hwfarmctl says so.
  CommandResult status = ctl(d, kViewer, {"status"});
  CHECK(status.out.find("tier:       1 (registered 1, since " + since + ")\n") != std::string::npos);
  CommandResult shown = ctl(d, kViewer, {"tier"});
  CHECK(shown.out.find("effective tier 1 (registered 1, policy 1, pinned -) since " + since + "\n") == 0);
  CommandResult sla = ctl(d, kViewer, {"sla"});
  CHECK(sla.out.find("effective tier 1 (registered 1, policy 1, pinned -) since " + since + "\n") == 0);
  for (const auto& out : {status.out, shown.out, sla.out}) CHECK(out.find("1970") == std::string::npos);

  // Given an SLA state saved by a version that did not keep that time,
  TempDir old;
  std::filesystem::create_directories(old.file("state"));
  old.write("state/sla.json", R"({"version":1,"policy_tier":1,"pin":null,"now_ms":)" +
                                  std::to_string(hwfarm::SystemClock().wallMs() - 60000) +
                                  R"(,"last_transition_ms":0,"healthy_since_ms":0,"effective_since_ms":0,)"
                                  R"("effective_reason":"registered tier 1","next_incident_id":1,"incidents":[],)"
                                  R"("transitions":[],"runs":[]})");
  RunningDaemon resumed(old, tokenFleet(old, 1));
  // the API says it does not know (null) and hwfarmctl shows no time.
  CHECK(tier(resumed).at("since").is_null());
  CHECK(standing(resumed).at("since").is_null());
  CHECK(parsed(resumed.get("/v1/healthz")).at("tier_since").is_null());
  CHECK(ctl(resumed, kViewer, {"status"}).out.find("tier:       1 (registered 1)\n") != std::string::npos);
  CHECK(ctl(resumed, kViewer, {"tier"}).out.find("effective tier 1 (registered 1, policy 1, pinned -)\n  registered tier 1\n") == 0);
  CHECK(ctl(resumed, kViewer, {"sla"}).out.find("effective tier 1 (registered 1, policy 1, pinned -)\n") == 0);
}

TEST_CASE("sla api: 25 runs of hostile firmware leave the tier and the board alone: each is the firmware's failure") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 1) + "[sla.tier1]\nresolution_window_h = 0.002\n");
  std::string lease_id = leaseBoard(d);
  // An image that is no firmware at all: the core locks up at reset and
  // QEMU aborts, on the board's simulator and on the reference alike.
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>("not an ELF\n"[i % 11]);
  // Given a pull request's firmware that damages its own records, miscounts
  // them, runs no test case, is no firmware, or resets the core mid-run
  // (which stops a simulator), 5 times each, every run
  // against the QEMU reference running the same image (as a run does by
  // default),
  for (int round = 0; round < 5; ++round) {
    for (const std::string variant : {"crc", "v2count", "health", "junk", "resetmid"}) {
      INFO(variant << " round " << round);
      json::object run;
      if (variant == "junk") {
        auto up = hwfarm::cli::HttpClient(d.url()).request("POST", "/v1/leases/" + lease_id + "/images?name=junk.bin",
                                                           junk, kPipeline, "application/octet-stream");
        REQUIRE(up.status == 201);
        std::string body = R"({"images":[{"image":")" + str(parsed(up).at("image")) + R"(","name":"junk.bin"}]})";
        auto started = d.request("POST", "/v1/leases/" + lease_id + "/runs", body, kPipeline);
        INFO(started.body);
        REQUIRE(started.status == 201);
        std::string id = str(parsed(started).at("id"));
        for (auto deadline = std::chrono::steady_clock::now() + 90s; std::chrono::steady_clock::now() < deadline;
             std::this_thread::sleep_for(50ms)) {
          run = parsed(d.get("/v1/runs/" + id, kViewer)).as_object();
          if (str(run.at("state")) != "running") break;
        }
      } else {
        run = runImage(d, lease_id, variant, variant);
      }
      INFO(json::serialize(run));
      // each run fails as the firmware's (a test failure), never the lab's,
      CHECK(str(run.at("state")) == "failed");
      CHECK(str(run.at("failure_class")) == "test");
      if (variant == "junk")
        CHECK(json::serialize(run).find("the firmware locked up the CPU (QEMU: Lockup") != std::string::npos);
      if (variant == "resetmid") // on the board's simulator and on the reference, each its own
        for (const auto& a : run.at("attempts").as_array()) {
          INFO(json::serialize(a));
          CHECK(str(a.at("reason")) == "the firmware reset the simulator before its END record");
          CHECK(str(a.at("failure_class")) == "test");
          CHECK(a.at("seconds").to_number<double>() < 30); // (its close told, not its 60 s deadline)
        }
    }
  }
  // and afterwards no incident is open, the tier is what it was, the
  // ratio counts no infrastructure failure, and the board serves on.
  json::object s = standing(d);
  INFO(json::serialize(s));
  CHECK(s.at("incidents").as_array().empty());
  CHECK(s.at("effective_tier").as_int64() == 1);
  CHECK(s.at("ratio").at("infra_failures").as_int64() == 0);
  CHECK(tier(d).at("transitions").as_array().empty());
  json::value boards = parsed(d.get("/v1/boards", kViewer));
  CHECK(str(boards.at("boards").at(0).at("state")) == "leased");
  CHECK(runImage(d, lease_id, "pass").at("state").as_string() == "passed");
}

TEST_CASE("a reload that removes a board while a run uses it ends the run and hwfarmd serves on") {
  TempDir dir;
  RunningDaemon d(dir, tokenFleet(dir, 2));
  auto lease = d.request("POST", "/v1/leases",
                         R"({"selector":{"type":"mps2-an385"},"count":2,"context":"manual","ttl_s":600})", kPipeline);
  REQUIRE(lease.status == 201);
  std::string lease_id = str(parsed(lease).at("id"));
  // Given a run of a firmware that never ends, on both boards,
  std::string image = uploadVariant(d, lease_id, "hang");
  auto started = d.request("POST", "/v1/leases/" + lease_id + "/runs",
                           R"({"images":[{"image":")" + image +
                               R"(","name":"hang.elf"}],"mode":"each","reference":"none","deadline_s":60})",
                           kPipeline);
  INFO(started.body);
  REQUIRE(started.status == 201);
  std::string id = str(parsed(started).at("id"));
  REQUIRE(waitForText(dir.file("state/consoles/" + lease_id + "/sim-1.log"), "HWFARM BEGIN", 20s));
  // when the operator reloads a configuration without sim-1,
  dir.write("fleet.toml", tokenFleet(dir, 1));
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  // the lease is revoked and the run ends, without waiting for its deadline,
  json::object run;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(50ms)) {
    run = parsed(d.get("/v1/runs/" + id, kViewer)).as_object();
    if (str(run.at("state")) != "running") break;
  }
  INFO(json::serialize(run));
  CHECK(str(run.at("state")) == "cancelled");
  // and hwfarmd serves on: no crash, and the board left is leased again.
  REQUIRE(d.process().running());
  CHECK(d.get("/v1/healthz").status == 200);
  CHECK(d.log().find("critical") == std::string::npos);
  auto again = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":10})",
                         kPipeline);
  CHECK(again.status == 201);
}
