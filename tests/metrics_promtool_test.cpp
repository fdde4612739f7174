// /metrics of a real hwfarmd with every family populated (leases held and
// waited for, runs ended, an open SLA incident, uploads to a real s3rver,
// an open console stream), checked by Prometheus' own `promtool check
// metrics` (Debian's prometheus): a metric that breaks the exposition
// format or Prometheus' naming rules fails here.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <boost/json.hpp>

#include "daemon/cli/http_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"
#include "tests/support/s3rver.h"

using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

std::string str(const json::value& v) { return std::string(v.as_string()); }
json::value parsed(const hwfarm::cli::HttpResult& r) { return json::parse(r.body); }

std::string lease(const RunningDaemon& d, const std::string& board_type) {
  auto r = d.request("POST", "/v1/leases", R"({"selector":{"type":")" + board_type + R"("},"context":"manual"})");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return str(parsed(r).at("id"));
}

// Starts `variant`'s test image on the lease's board without a reference;
// the run's id.
std::string startRun(const RunningDaemon& d, const std::string& lease_id, const std::string& variant) {
  auto up = hwfarm::cli::HttpClient(d.url()).request(
      "POST", "/v1/leases/" + lease_id + "/images?name=" + variant + ".elf",
      readFile(std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf"), "", "application/octet-stream");
  REQUIRE(up.status == 201);
  auto started = d.request("POST", "/v1/leases/" + lease_id + "/runs",
                           R"({"images":[{"image":")" + str(parsed(up).at("image")) + R"("}],"reference":"none"})");
  INFO(started.body);
  REQUIRE(started.status == 201);
  return str(parsed(started).at("id"));
}

// Runs `variant` as startRun does; the run's record once it ended.
json::object runImage(const RunningDaemon& d, const std::string& lease_id, const std::string& variant) {
  std::string id = startRun(d, lease_id, variant);
  for (auto deadline = std::chrono::steady_clock::now() + 90s; std::chrono::steady_clock::now() < deadline;) {
    json::object run = parsed(d.get("/v1/runs/" + id)).as_object();
    if (str(run.at("state")) != "running") return run;
    std::this_thread::sleep_for(50ms);
  }
  FAIL("run " << id << " did not end");
  return {};
}

} // namespace

TEST_CASE("promtool check metrics accepts the metrics of a hwfarmd with leases runs an SLA incident and uploads") {
  // Given hwfarmd uploading to a real s3rver, with a board and one whose
  // simulator cannot start,
  TempDir dir;
  S3rver s3(dir, dir.file("s3data"));
  std::string config = qemuFleet(dir.file("state"), 1) +
                       "  [[worker.board]]\n  name = \"broken-0\"\n  type = \"broken\"\n  driver = \"qemu\"\n"
                       "  qemu = { machine = \"mps2-an385\", binary = \"" + dir.file("no-such-qemu") + "\" }\n" +
                       uploadTable(s3.port(), "metrics", s3Credentials(dir));
  RunningDaemon d(dir, config);
  // a passed run on the board, an infrastructure failure on the broken one
  // (an open SLA incident), both queued for upload,
  std::string good = lease(d, "mps2-an385");
  REQUIRE(str(runImage(d, good, "pass").at("state")) == "passed");
  std::string broken = lease(d, "broken");
  REQUIRE(str(runImage(d, broken, "pass").at("state")) == "error");
  // a request that waited for a board and gave up, and a console stream
  // open on the held board,
  auto waited = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":0.2})");
  REQUIRE(waited.status == 408);
  // (the board's console is live while a run of the hang image runs: a
  // console whose simulator ended answers its backlog and closes)
  startRun(d, good, "hang");
  auto begins = [&] {
    std::string log = readFile(dir.file("state/consoles/" + good + "/sim-0.log"));
    size_t n = 0;
    for (size_t at = log.find("HWFARM BEGIN"); at != std::string::npos; at = log.find("HWFARM BEGIN", at + 1)) ++n;
    return n;
  };
  for (auto deadline = std::chrono::steady_clock::now() + 20s; begins() < 2 && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(20ms);
  REQUIRE(begins() == 2); // the pass run's, then the hang run's
  int console = connectRaw(d.url());
  REQUIRE(console >= 0);
  std::string get = "GET /v1/leases/" + good + "/boards/sim-0/console HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::write(console, get.data(), get.size()) == static_cast<ssize_t>(get.size()));

  // when its /metrics is scraped,
  std::string text;
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    auto r = d.get("/metrics");
    REQUIRE(r.status == 200);
    text = r.body;
    if (text.find("hwfarm_streams_open{agent=\"test-lab\"} 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  ::close(console);
  INFO(text);
  // every family has its samples (so promtool sees each of them),
  for (const char* sample : {"hwfarm_leases_active{agent=\"test-lab\"} 2\n",
                             "hwfarm_lease_wait_timeouts_total{agent=\"test-lab\"} 1\n",
                             "hwfarm_streams_open{agent=\"test-lab\"} 1\n",
                             "hwfarm_runs_total{agent=\"test-lab\",state=\"passed\"} 1\n",
                             "hwfarm_runs_total{agent=\"test-lab\",state=\"error\"} 1\n",
                             "hwfarm_run_attempts_total{agent=\"test-lab\",class=\"infrastructure\"} 1\n",
                             "hwfarm_sla_open_incidents{agent=\"test-lab\"} 1\n",
                             "hwfarm_sla_time_to_demotion_seconds{agent=\"test-lab\"} ",
                             "hwfarm_uploads{agent=\"test-lab\",state=\"failed\"} 0\n"})
    CHECK(text.find(sample) != std::string::npos);
  // and promtool finds nothing to complain about.
  std::string scraped = dir.write("metrics.txt", text);
  CommandResult check = runCommand({"/bin/sh", "-c", std::string(PROMTOOL_PATH) + " check metrics < " + scraped});
  CHECK(check.out + check.err == "");
  CHECK(check.status.exited);
  CHECK(check.status.code == 0);
}

TEST_CASE("promtool check metrics fails a metric that breaks Prometheus' naming rules") {
  // Given the exposition of a gauge with a counter's suffix (the name
  // /metrics had before: hwfarm_stream_count),
  TempDir dir;
  std::string bad = dir.write("metrics.txt", "# HELP hwfarm_stream_count Open streams.\n"
                                             "# TYPE hwfarm_stream_count gauge\n"
                                             "hwfarm_stream_count{agent=\"test-lab\"} 0\n");
  // promtool, as the test above runs it, rejects it, naming the metric.
  CommandResult check = runCommand({"/bin/sh", "-c", std::string(PROMTOOL_PATH) + " check metrics < " + bad});
  CHECK(check.status.code != 0);
  CHECK(check.err.find("hwfarm_stream_count non-histogram and non-summary metrics should not have \"_count\" suffix") !=
        std::string::npos);
}
