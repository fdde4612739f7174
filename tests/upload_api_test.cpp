// Uploads through a real hwfarmd to a real S3-compatible server (npm's
// s3rver 3.7.1 on 127.0.0.1, tests/s3/): a run on the QEMU sim fleet, its
// artifacts read back byte for byte, the day's index.json; the server down
// during an upload; a restart with uploads pending; wrong credentials; keys
// with every character a prefix or name may hold.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <thread>
#include <utility>

#include <boost/json.hpp>

#include "daemon/cli/http_client.h"
#include "daemon/core/run/tar.h"
#include "daemon/core/upload/policy.h"
#include "daemon/services/s3_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/process.h"
#include "tests/support/s3rver.h"

using namespace hwfarm;
using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

const char* kBucket = S3rver::kBucket;
const char* kAgent = "test-lab"; // qemuFleet's agent.name

// A client of the test server with its default key, to read the bucket back.
S3Client reader(int port) {
  return S3Client({"http://127.0.0.1:" + std::to_string(port), "us-east-1", kBucket}, {"S3RVER", "S3RVER"});
}

std::string fleet(const TempDir& dir, int port, const std::string& prefix, const std::string& creds) {
  return qemuFleet(dir.file("state"), 1) + uploadTable(port, prefix, creds);
}

json::value parsed(const cli::HttpResult& r) { return json::parse(r.body); }

// Leases the simulated board and starts `variant`'s image on it (no
// reference; `options`: more members of the request); its lease and run ids.
std::pair<std::string, std::string> startRun(const RunningDaemon& d, const std::string& variant,
                                             const std::string& options = "") {
  auto lease =
      d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"count":1,"context":"manual"})", "");
  REQUIRE(lease.status == 201);
  std::string id(parsed(lease).at("id").as_string());
  auto image = cli::HttpClient(d.url()).request("POST", "/v1/leases/" + id + "/images?name=" + variant + ".elf",
                                                readFile(std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf"),
                                                "", "application/octet-stream");
  REQUIRE(image.status == 201);
  auto run = d.request("POST", "/v1/leases/" + id + "/runs",
                       R"({"images":[{"image":")" + std::string(parsed(image).at("image").as_string()) +
                           R"("}],"reference":"none")" + options + "}");
  INFO(run.body);
  REQUIRE(run.status == 201);
  return {id, std::string(parsed(run).at("id").as_string())};
}

// Runs the pass image on the simulated board (no reference); the ended record.
json::object passRun(const RunningDaemon& d, const std::string& commit = "") {
  auto [id, run_id] =
      startRun(d, "pass", commit.empty() ? "" : R"(,"commit":)" + json::serialize(json::string(commit)));
  for (int i = 0; i < 1800; ++i) {
    json::object o = parsed(d.get("/v1/runs/" + run_id)).as_object();
    if (o.at("state").as_string() != "running") {
      REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
      return o;
    }
    std::this_thread::sleep_for(50ms);
  }
  FAIL("run " << run_id << " did not end");
  return {};
}

json::array unfinished(const RunningDaemon& d) {
  auto r = d.get("/v1/uploads");
  REQUIRE(r.status == 200);
  return parsed(r).at("uploads").as_array();
}

// Waits until GET /v1/uploads lists nothing (every upload done).
void waitDone(const RunningDaemon& d) {
  for (int i = 0; i < 600; ++i) {
    if (unfinished(d).empty()) return;
    std::this_thread::sleep_for(50ms);
  }
  FAIL("uploads still unfinished: " << json::serialize(unfinished(d)));
}

// Every artifact of `run` (files under the daemon's runs/<id>/) is in the
// bucket under the run's key, byte for byte; the day's index.json lists
// the run with its verdict.
void checkBucket(const TempDir& dir, int port, const std::string& prefix, const json::object& run,
                 size_t min_files = 3) {
  std::string id(run.at("id").as_string());
  S3Client s3 = reader(port);
  std::string run_dir = dir.file("state") + "/runs/" + id;
  size_t files = 0;
  json::value index;
  // The day is today's (UTC): the run just ended.
  std::string today = upload::utcDay(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
  std::string commit = run.contains("commit") ? std::string(run.at("commit").as_string()) : "unknown";
  std::string key = upload::runKey(prefix, kAgent, today, commit, id);
  for (const auto& e : fs::recursive_directory_iterator(run_dir)) {
    if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
    std::string rel = fs::relative(e.path(), run_dir).string();
    S3Answer a = s3.get(key + "/" + rel);
    INFO(key + "/" + rel << ": " << a.error);
    REQUIRE(a.ok());
    CHECK(a.body == readFile(e.path().string()));
    ++files;
  }
  CHECK(files >= min_files); // summary.json, junit.xml, a trace at least (an interrupted run: its summary.json)
  S3Answer i = s3.get(upload::indexKey(prefix, kAgent, today));
  INFO(i.error);
  REQUIRE(i.ok());
  index = json::parse(i.body);
  bool listed = false;
  for (const auto& r : index.at("runs").as_array())
    if (r.at("run").as_string() == id) {
      listed = true;
      CHECK(r.at("verdict") == run.at("state"));
      CHECK(r.at("key").as_string() == key);
      CHECK(r.at("commit").as_string() == commit);
      CHECK(r.at("uploaded").as_bool());
    }
  CHECK(listed);
}

// The port of an s3rver that ran on <dir>/s3data and is stopped now.
int stoppedServerPort(const TempDir& dir) {
  S3rver s3(dir, dir.file("s3data"));
  return s3.port();
}

// GET /v1/uploads until `done(list)` holds (or 10 s); the last list.
template <typename Pred>
json::array waitUploads(const RunningDaemon& d, Pred done) {
  json::array list;
  for (int i = 0; i < 200; ++i) {
    list = unfinished(d);
    if (done(list)) break;
    std::this_thread::sleep_for(50ms);
  }
  return list;
}

} // namespace

TEST_CASE("a run's artifacts go to the bucket byte for byte under keys of every character with the day's index") {
  TempDir dir;
  S3rver s3(dir, dir.file("s3data"));
  // A prefix holding every kind of character a key may carry.
  std::string prefix = "lab results/a+b%c&d=e;f,g$h@i!j(k)*l[m]{n}^o`p|q\"r<s>t#u?v\xc3\xbc/w.x~y";
  RunningDaemon d(dir, fleet(dir, s3.port(), prefix, s3Credentials(dir)));
  // and a commit of such characters (a tag, a ref) named by the run.
  json::object run = passRun(d, "v1.2+rc 1~\xc3\xbc&=%;@!'()*$,");
  CHECK(run.at("state") == "passed");
  CHECK(run.at("commit") == "v1.2+rc 1~\xc3\xbc&=%;@!'()*$,");
  waitDone(d);
  checkBucket(dir, s3.port(), prefix, run);
  // A second run of the day, no commit: "unknown"; the index lists both.
  json::object second = passRun(d);
  waitDone(d);
  checkBucket(dir, s3.port(), prefix, second);
  checkBucket(dir, s3.port(), prefix, run);
}

TEST_CASE("a harness's published results go to the bucket with the index like hwfarm's own runs") {
  TempDir dir;
  S3rver s3(dir, dir.file("s3data"));
  RunningDaemon d(dir, fleet(dir, s3.port(), "harness", s3Credentials(dir)));
  auto lease =
      d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"count":1,"context":"manual"})", "");
  REQUIRE(lease.status == 201);
  std::string id(parsed(lease).at("id").as_string());
  // A pytest JUnit file with a failure, and a log beside it.
  std::string junit = R"(<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" )"
                      R"(failures="1" skipped="0" tests="2"><testcase classname="test_board" name="test_ok" time="0.1"/>)"
                      R"(<testcase classname="test_board" name="test_bad" time="0.2"><failure message="assert 0">)"
                      R"(assert 0</failure></testcase></testsuite></testsuites>)";
  std::string archive;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"results/r.xml", junit}, {"artifacts/logs/console.txt", "boot\n"}}) {
    archive += run::tarHeader({name, bytes.size(), 0, 0644}) + bytes;
    archive.append(run::tarPadding(bytes.size()), '\0');
  }
  archive += run::tarEnd();
  auto published = cli::HttpClient(d.url()).request("POST", "/v1/leases/" + id + "/results?name=pytest&commit=c0ffee",
                                                    archive, "", "application/x-tar");
  INFO(published.body);
  REQUIRE(published.status == 201);
  json::object run = parsed(published).as_object();
  CHECK(run.at("state") == "failed");
  CHECK(run.at("kind") == "external");
  waitDone(d);
  checkBucket(dir, s3.port(), "harness", run);
  // Byte for byte what the harness wrote.
  std::string today = upload::utcDay(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
  S3Answer a = reader(s3.port()).get(upload::runKey("harness", kAgent, today, "c0ffee", std::string(run.at("id").as_string())) +
                                     "/results/r.xml");
  REQUIRE(a.ok());
  CHECK(a.body == junit);
}

TEST_CASE("with s3rver down the upload is retried with backoff and completes when it is back with nothing lost") {
  TempDir dir;
  int port = stoppedServerPort(dir);
  RunningDaemon d(dir, fleet(dir, port, "down", s3Credentials(dir)));
  json::object run = passRun(d);
  // Given failed attempts while the server is away
  json::array pending =
      waitUploads(d, [](const json::array& l) { return !l.empty() && l[0].at("failures").as_int64() >= 2; });
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].at("state") == "pending");
  CHECK(pending[0].at("failures").as_int64() >= 2);
  CHECK(pending[0].at("error").as_string().find("PUT") != std::string::npos);
  CHECK(pending[0].as_object().contains("next_attempt_at"));
  // then the server comes back on its port: everything arrives.
  S3rver again(dir, dir.file("s3data"), port);
  waitDone(d);
  checkBucket(dir, port, "down", run);
}

TEST_CASE("uploads pending when hwfarmd is killed complete after its restart") {
  TempDir dir;
  int port = stoppedServerPort(dir);
  RunningDaemon d(dir, fleet(dir, port, "restart", s3Credentials(dir)));
  json::object run = passRun(d);
  REQUIRE(unfinished(d).size() == 1);
  d.killAndRestart();
  REQUIRE(unfinished(d).size() == 1); // the queue is durable
  S3rver again(dir, dir.file("s3data"), port);
  waitDone(d);
  checkBucket(dir, port, "restart", run);
}

TEST_CASE("a run that hwfarmd's kill -9 cut short goes to the bucket as interrupted after the restart") {
  TempDir dir;
  S3rver s3(dir, dir.file("s3data"));
  RunningDaemon d(dir, fleet(dir, s3.port(), "cut", s3Credentials(dir)));
  // Given a run of the hang image, running when hwfarmd is killed,
  std::string id = startRun(d, "hang", R"(,"deadline_s":60)").second;
  d.killAndRestart();
  // the restart marks it interrupted and uploads it: its files and the index.
  json::object ended = parsed(d.get("/v1/runs/" + id)).as_object();
  CHECK(ended.at("state").as_string() == "interrupted");
  waitDone(d);
  checkBucket(dir, s3.port(), "cut", ended, 1);
}

TEST_CASE("wrong credentials fail the upload once with a clear permanent error and no retry storm") {
  TempDir dir;
  S3rver s3(dir, dir.file("s3data"));
  RunningDaemon d(dir, fleet(dir, s3.port(), "wrong", s3Credentials(dir, "NOT-A-KEY")));
  json::object run = passRun(d);
  auto failed = [](const json::array& l) { return l.size() == 1 && l[0].at("state") == "failed"; };
  json::array list = waitUploads(d, failed);
  REQUIRE(list.size() == 1);
  CHECK(list[0].at("state") == "failed");
  CHECK(list[0].at("error").as_string().find("403 InvalidAccessKeyId") != std::string::npos);
  // With retry_initial_s = 0.2 a transient error would have been retried
  // about ten times in two seconds; a permanent one is not retried at all.
  std::this_thread::sleep_for(2s);
  list = unfinished(d);
  REQUIRE(list.size() == 1);
  CHECK(list[0].at("failures").as_int64() == 1);
  CHECK(d.log().find("not retried") != std::string::npos);
  // hwfarmctl shows it; a retry (the run's lease holder: anonymous here) tries once more.
  CommandResult ls = runCommand({HWFARMCTL_PATH, "--url", d.url(), "uploads"});
  CHECK(ls.status.code == 0);
  CHECK(ls.out.find(std::string(run.at("id").as_string())) != std::string::npos);
  CHECK(ls.out.find("InvalidAccessKeyId") != std::string::npos);
  CommandResult retry =
      runCommand({HWFARMCTL_PATH, "--url", d.url(), "upload", "retry", std::string(run.at("id").as_string())});
  INFO(retry.out << retry.err);
  CHECK(retry.status.code == 0);
  list = waitUploads(d, failed);
  REQUIRE(list.size() == 1);
  CHECK(list[0].at("failures").as_int64() == 1);
  CHECK(d.request("POST", "/v1/uploads/nope/retry", "{}").status == 404);
}

TEST_CASE("with uploads disabled upload retry says that uploads are disabled whatever the run") {
  // Given a daemon without [upload] (a run's upload is never queued there),
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  for (const char* run : {"run-0000000000000001", "nope"}) {
    // when hwfarmctl retries a run's upload,
    CommandResult retry = runCommand({HWFARMCTL_PATH, "--url", d.url(), "upload", "retry", run});
    // then the answer is that uploads are disabled, not that the run has no upload.
    CHECK(retry.status.code == 1);
    CHECK(retry.out.empty());
    CHECK(retry.err == "hwfarmctl: HTTP 409: uploads_disabled: uploads are disabled ([upload] enabled = false)\n");
  }
}

TEST_CASE("a credentials file its group may read stops hwfarmd from starting and fails check-config naming it") {
  TempDir dir;
  std::string creds = s3Credentials(dir);
  ::chmod(creds.c_str(), 0640);
  std::string config = dir.write("fleet.toml", fleet(dir, 9, "x", creds));
  CommandResult r = runCommand({HWFARMD_PATH, "--config", config}, {}, 20s);
  CHECK(r.status.code == 1);
  std::string refusal = creds + ": credentials file is open to group or others (mode 0640)";
  CHECK((r.out + r.err).find(refusal) != std::string::npos);
  CommandResult check = runCommand({HWFARMD_PATH, "--check-config", config});
  CHECK(check.status.code == 1);
  CHECK(check.err.find(refusal) != std::string::npos);
  ::chmod(creds.c_str(), 0600);
  check = runCommand({HWFARMD_PATH, "--check-config", config});
  INFO(check.err);
  CHECK(check.status.code == 0);
}

TEST_CASE("a reload turns uploads on with the credentials file read again and a bad one fails the reload") {
  TempDir dir;
  S3rver s3(dir, dir.file("s3data"));
  std::string creds = s3Credentials(dir);
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  // Given uploads off, a run is not queued.
  json::object before = passRun(d);
  CHECK(unfinished(d).empty());
  CHECK(parsed(d.get("/v1/uploads")).at("enabled") == false);
  // A reload naming a credentials file its group may read fails and keeps uploads off,
  ::chmod(creds.c_str(), 0640);
  dir.write("fleet.toml", fleet(dir, s3.port(), "reload", creds));
  d.process().signal(SIGHUP);
  auto log = waitForText(d.logPath(), "reload failed", 10s);
  REQUIRE(log);
  CHECK(log->find(creds + ": credentials file is open to group or others (mode 0640)") != std::string::npos);
  CHECK(parsed(d.get("/v1/uploads")).at("enabled") == false);
  // and once the file is private, the next reload turns them on: the next run goes up.
  ::chmod(creds.c_str(), 0600);
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  CHECK(parsed(d.get("/v1/uploads")).at("enabled") == true);
  json::object run = passRun(d);
  waitDone(d);
  checkBucket(dir, s3.port(), "reload", run);
  CHECK(reader(s3.port()).get(upload::runKey("reload", kAgent, upload::utcDay(before.at("ended_ms").as_int64()),
                                             "unknown", std::string(before.at("id").as_string())) +
                              "/summary.json")
            .http_status == 404);
}
