// A run's record stays small whatever its firmware prints (docs/runs.md,
// "Huge outputs"): a real hwfarmd runs an image of 10,000 cases on a QEMU
// board against the QEMU reference. The record, summary.json and junit.xml
// keep the first cases (failing ones first) and count the rest exactly;
// the trace keeps every line; the verdict comes from every case.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include <boost/json.hpp>

#include "tests/support/daemon_harness.h"
#include "tests/support/firmware.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
namespace json = boost::json;

namespace {

json::value parsed(const hwfarm::cli::HttpResult& r) { return json::parse(r.body); }

std::string leaseBoard(const RunningDaemon& d) {
  auto r = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"count":1,"context":"manual"})", "");
  REQUIRE(r.status == 201);
  return std::string(parsed(r).at("id").as_string());
}

std::string uploadImage(const RunningDaemon& d, const std::string& lease, const std::string& variant,
                        const std::string& name) {
  auto r = hwfarm::cli::HttpClient(d.url())
               .request("POST", "/v1/leases/" + lease + "/images?name=" + name, readFile(firmware(variant)), "",
                        "application/octet-stream");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return std::string(parsed(r).at("image").as_string());
}

// xmllint's verdict on `file` against the junit schema Jenkins reads.
int schemaCheck(const std::string& file) {
  std::string cmd = "xmllint --noout --schema " + std::string(HWFARM_SOURCE_DIR) + "/tests/junit-10-contract.xsd " +
                    file + " >/dev/null 2>&1";
  return WEXITSTATUS(std::system(cmd.c_str()));
}

// The attempt's counts, as "cases/passed/failed/skipped/errors".
std::string counts(const json::object& attempt) {
  const json::object& c = attempt.at("counts").as_object();
  std::string out;
  for (const char* k : {"cases", "passed", "failed", "skipped", "errors"})
    out += (out.empty() ? "" : "/") + std::to_string(c.at(k).as_int64());
  return out;
}

} // namespace

TEST_CASE("images of 10,000 cases keep a bounded record and junit.xml, with every count exact and the verdict failed") {
  TempDir dir;
  std::string id;
  {
    RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
    std::string lease = leaseBoard(d);
    // Given three images that each print 10,000 cases (8,000 fail, 1,000
    // pass, 1,000 are skipped), on one board against the QEMU reference,
    std::string images = "[";
    for (const char* name : {"a.elf", "b.elf", "c.elf"})
      images += (images.size() > 1 ? "," : "") + std::string(R"({"image":")") +
                uploadImage(d, lease, "manycases", name) + R"(","name":")" + name + R"("})";
    auto started = d.request("POST", "/v1/leases/" + lease + "/runs", R"({"images":)" + images + "]}", "");
    INFO(started.body);
    REQUIRE(started.status == 201);
    id = std::string(parsed(started).at("id").as_string());
    // when the run ends,
    std::string at_end = d.recordAtEnd(id);
    json::object run = json::parse(at_end).as_object();
    // then it failed the firmware's way,
    CHECK(run.at("state").as_string() == "failed");
    CHECK(run.at("failure_class").as_string() == "test");
    // each target attempt lists 100 cases, the failing ones, each in full,
    // and counts all 10,000 exactly, saying how many it left out;
    size_t targets = 0;
    for (const auto& a : run.at("attempts").as_array()) {
      if (a.at("reference").as_bool()) continue;
      ++targets;
      const json::object& attempt = a.as_object();
      CHECK(attempt.at("outcome").as_string() == "fail");
      CHECK(counts(attempt) == "10000/1000/8000/1000/0");
      CHECK(attempt.at("cases_left_out").as_int64() == 9900);
      const json::array& cases = attempt.at("cases").as_array();
      REQUIRE(cases.size() == 100);
      CHECK(cases.front().at("name").as_string() == "case00002");
      CHECK(cases.front().at("message").as_string() == "FAIL: boom");
      for (const auto& c : cases) CHECK(c.at("outcome").as_string() == "fail");
    }
    CHECK(targets == 3);
    // the record is the same small text wherever it is read: the event
    // stream, GET /v1/runs/{id}, summary.json (a copy of 30,000 cases
    // would be over 1.5 MB).
    std::string shown = d.get("/v1/runs/" + id).body;
    std::string summary = readFile(dir.file("state/runs/" + id + "/summary.json"));
    CHECK(shown == at_end);
    CHECK(summary == at_end);
    CHECK(shown.size() < 64 * 1024);
  }
  std::string out = dir.file("state/runs/" + id);
  // junit.xml is valid for Jenkins and small: per image its 100 failing
  // cases, then one failing "(9900 more cases)" that counts the rest;
  std::string junit = readFile(out + "/junit.xml");
  CHECK(schemaCheck(out + "/junit.xml") == 0);
  CHECK(junit.size() < 128 * 1024);
  CHECK(occurrences(junit, "<testcase ") == 3 * 101);
  CHECK(occurrences(junit, "name=\"(9900 more cases)\"") == 3);
  CHECK(occurrences(junit, "<failure type=\"test\" message=\"9900 more cases, not listed: 7900 failed, 0 erred, "
                           "1000 skipped, 1000 passed (of 10000 cases;") == 3);
  // the trace keeps every line the board printed.
  std::string trace = readFile(out + "/traces/a__mps2_an385.txt");
  CHECK(occurrences(trace, "HWFARM TEST case") == 10000);
  CHECK(trace.find("HWFARM TEST case09999 FAIL boom") != std::string::npos);

  // After a restart, the stored record is read when it is asked for, the
  // same through the event stream and GET, with the same counts.
  RunningDaemon again(dir, qemuFleet(dir.file("state"), 1));
  std::string read = again.recordAtEnd(id);
  CHECK(read == again.get("/v1/runs/" + id).body);
  json::object stored = json::parse(read).as_object();
  for (const auto& a : stored.at("attempts").as_array())
    if (!a.at("reference").as_bool()) {
      CHECK(counts(a.as_object()) == "10000/1000/8000/1000/0");
      CHECK(a.at("cases_left_out").as_int64() == 9900);
    }
}
