// The retry of an infrastructure failure on another board (issue 11): two
// fault-injection boards of one type behind ptys, driven through hwfarmd's
// real serial-board path; the first one's flasher fails. The run swaps the
// other board into the lease, runs the image there, keeps both attempts,
// and never retries a test failure or a second time.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <thread>

#include "daemon/cli/http_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/fake_board.h"
#include "tests/support/firmware.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string fleet(const TempDir& dir) {
  return qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") + fakeBoard(dir, 1) + fakeBoard(dir, 2);
}

// `board` (a fakeBoard entry) with its `key = ...` line replaced by `line`.
std::string withLine(std::string board, const std::string& key, const std::string& line) {
  size_t at = board.find("  " + key + " = ");
  REQUIRE(at != std::string::npos);
  return board.replace(at, board.find('\n', at) + 1 - at, line);
}

void setMode(const TempDir& dir, int n, const std::string& mode) {
  CommandResult r = runCommand({FAKE_BOARD_PATH, "mode", dir.file("fake" + std::to_string(n) + ".sock"), mode});
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
}

std::string stateOf(const RunningDaemon& d, const std::string& board) {
  json::value boards = json::parse(d.get("/v1/boards").body);
  for (const auto& b : boards.at("boards").as_array())
    if (b.at("name").as_string() == board) return std::string(b.at("state").as_string());
  return "";
}

bool waitState(const RunningDaemon& d, const std::string& board, const std::string& state) {
  for (int i = 0; i < 500; ++i) {
    if (stateOf(d, board) == state) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::vector<std::string> leaseBoards(const RunningDaemon& d, const std::string& lease) {
  std::vector<std::string> out;
  json::value l = json::parse(d.get("/v1/leases/" + lease).body);
  for (const auto& b : l.at("boards").as_array())
    out.emplace_back(b.at("name").as_string());
  return out;
}

std::string upload(const RunningDaemon& d, const std::string& lease, const std::string& text,
                   const std::string& name = "fw.bin") {
  auto r = hwfarm::cli::HttpClient(d.url())
               .request("POST", "/v1/leases/" + lease + "/images?name=" + name, text, "", "application/octet-stream");
  REQUIRE(r.status == 201);
  return std::string(json::parse(r.body).at("image").as_string());
}

// Starts a run of `body` on the lease and returns its record at its end.
json::object ranToEnd(const RunningDaemon& d, const std::string& lease, const std::string& body) {
  auto r = d.request("POST", "/v1/leases/" + lease + "/runs", body, "");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return json::parse(d.recordAtEnd(std::string(json::parse(r.body).at("id").as_string()))).as_object();
}

json::object run(const RunningDaemon& d, const std::string& lease, const std::string& image,
                 const std::string& extra = "") {
  return ranToEnd(d, lease, R"({"images":[{"image":")" + image + R"(","name":"fw.bin"}],"reference":"none")" + extra + "}");
}

const std::string kPass = "HWFARM BEGIN suite=fake\nHWFARM TEST t PASS\nHWFARM END status=0\n";

// Leases one fake board of two, both unused: fake-1, the first in
// configuration order, is granted.
std::string leaseFirst(const RunningDaemon& d) {
  REQUIRE(waitState(d, "fake-1", "available"));
  REQUIRE(waitState(d, "fake-2", "available"));
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  REQUIRE(leaseBoards(d, lease) == std::vector<std::string>{"fake-1"});
  return lease;
}

// A run of the pass image on fake-1 (leaseFirst) put in a fault mode.
struct FaultyRun {
  std::string lease, image;
  json::object record;
};
FaultyRun runOnFaulty(const TempDir& dir, const RunningDaemon& d, const std::string& mode) {
  FaultyRun f;
  f.lease = leaseFirst(d);
  setMode(dir, 1, mode);
  f.image = upload(d, f.lease, kPass);
  f.record = run(d, f.lease, f.image);
  return f;
}

} // namespace

TEST_CASE("an infrastructure failure is retried once on another board swapped into the lease") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2);
  FaultyRun faulty = runOnFaulty(dir, d, "flash-fail");
  const std::string &lease = faulty.lease, &image = faulty.image;
  const json::object& r = faulty.record;
  INFO(json::serialize(r));
  std::string id(r.at("id").as_string());
  CHECK(r.at("state").as_string() == "passed");
  const json::array& attempts = r.at("attempts").as_array();
  REQUIRE(attempts.size() == 2);
  // The first attempt: the flasher's failure, kept with its evidence.
  CHECK(attempts[0].at("board").as_string() == "fake-1");
  CHECK(attempts[0].at("target").as_string() == "fake");
  CHECK(attempts[0].at("failure_class").as_string() == "infrastructure");
  CHECK(attempts[0].at("retried").as_bool());
  CHECK(attempts[0].at("evidence").at("tool_output").as_string().find("verify failed") != std::string::npos);
  // The retry: the same target on the board swapped in.
  CHECK(attempts[1].at("board").as_string() == "fake-2");
  CHECK(attempts[1].at("target").as_string() == "fake");
  CHECK(attempts[1].at("retry_of_board").as_string() == "fake-1");
  CHECK(attempts[1].at("outcome").as_string() == "pass");
  const json::array& targets = r.at("targets").as_array();
  REQUIRE(targets.size() == 2);
  CHECK(targets[1].at("board").as_string() == "fake-2");
  CHECK(targets[1].at("replaces").as_string() == "fake-1");
  // The holder sees the new board list; the failed board left the lease.
  CHECK(leaseBoards(d, lease) == std::vector<std::string>{"fake-2"});
  CHECK(stateOf(d, "fake-2") == "leased");
  CHECK(stateOf(d, "fake-1") != "leased");
  // Both attempts' artifacts, none overwriting the other; the verdict files
  // hold the retry.
  std::string runs = dir.file("state/runs/" + id);
  CHECK(readFile(runs + "/logs/flash__fw__fake__attempt1.txt").find("verify failed") != std::string::npos);
  CHECK(readFile(runs + "/traces/fw__fake.txt").find("HWFARM END status=0") != std::string::npos);
  std::string junit = readFile(runs + "/junit.xml");
  CHECK(junit.find("errors=\"0\"") != std::string::npos);
  CHECK(junit.find("<error") == std::string::npos);

  SECTION("a second failure is not retried again, and a test failure never") {
    setMode(dir, 2, "flash-fail");
    REQUIRE(waitState(d, "fake-1", "available"));
    json::object twice = run(d, lease, image);
    INFO(json::serialize(twice));
    CHECK(twice.at("state").as_string() == "error");
    CHECK(twice.at("failure_class").as_string() == "infrastructure");
    const json::array& a = twice.at("attempts").as_array();
    REQUIRE(a.size() == 2);
    CHECK(a[0].at("board").as_string() == "fake-2");
    CHECK(a[1].at("board").as_string() == "fake-1");
    CHECK(a[1].at("failure_class").as_string() == "infrastructure");
    CHECK_FALSE(a[1].as_object().contains("retried"));
    CHECK(leaseBoards(d, lease) == std::vector<std::string>{"fake-1"});

    setMode(dir, 1, "normal");
    json::object failing = run(d, lease, upload(d, lease, "HWFARM BEGIN suite=fake\nHWFARM TEST t FAIL nope\nHWFARM END status=1\n"));
    CHECK(failing.at("state").as_string() == "failed");
    CHECK(failing.at("attempts").as_array().size() == 1);
  }
  SECTION("without a free board of the type, or with retry off, the failure stands") {
    auto other = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual","wait_s":10})", "");
    // fake-1 recovers (recovery_s 0) and goes to the second lease; fail it
    // and run on it with no board left to swap in.
    REQUIRE(other.status == 201);
    std::string second(json::parse(other.body).at("id").as_string());
    REQUIRE(leaseBoards(d, second) == std::vector<std::string>{"fake-1"});
    json::object alone = run(d, second, upload(d, second, kPass));
    INFO(json::serialize(alone));
    CHECK(alone.at("state").as_string() == "error");
    const json::array& a = alone.at("attempts").as_array();
    REQUIRE(a.size() == 1);
    CHECK(a[0].at("not_retried").as_string() == "no other board of type fake is available to replace fake-1");
    REQUIRE(d.request("DELETE", "/v1/leases/" + lease, "", "").status == 200);
    REQUIRE(waitState(d, "fake-2", "available"));
    // Each image of the board is still tried after a failed flash (two
    // images, each mode): the run ends with both attempts.
    std::string pass = upload(d, second, kPass);
    json::object off = run(d, second, pass, R"(,"retry":false,"mode":"each")");
    CHECK(off.at("state").as_string() == "error");
    CHECK(off.at("attempts").as_array().size() == 1);
    auto two = d.request("POST", "/v1/leases/" + second + "/runs",
                         R"({"images":[{"image":")" + pass + R"(","name":"a.bin"},{"image":")" + pass +
                             R"(","name":"b.bin"}],"reference":"none","retry":false,"mode":"each"})",
                         "");
    REQUIRE(two.status == 201);
    std::string two_id(json::parse(two.body).at("id").as_string());
    json::object ended = json::parse(d.recordAtEnd(two_id)).as_object();
    CHECK(ended.at("state").as_string() == "error");
    CHECK(ended.at("attempts").as_array().size() == 2);
    CHECK(leaseBoards(d, second) == std::vector<std::string>{"fake-1"});
  }
}

namespace {

// Fake board 3 of type "bare" without a power switch, its flasher resetting
// it, whose health image prints the banner; `flash`: another flash line.
std::string healthBoard(TempDir& dir, const std::string& flash = "") {
  std::string health = dir.write("health.txt", "HEALTH OK\n");
  std::string board = fakeBoard(dir, 3, false, "bare",
                                "  health = { image = \"" + health + "\", banner = \"^HEALTH OK\", timeout_s = 10 }\n");
  return flash.empty() ? board : withLine(board, "flash", flash);
}

// Once fake-3's health check passed: leases it at once and runs the pass
// image on it; the run's record (`lease`: the lease's id).
json::object leaseAndRun(const RunningDaemon& d, std::string& lease) {
  REQUIRE(waitState(d, "fake-3", "available"));
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"bare"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  lease = std::string(json::parse(granted.body).at("id").as_string());
  return run(d, lease, upload(d, lease, kPass));
}

} // namespace

TEST_CASE("verdict: a board unplugged mid-run is the lab's failure, retried on another board, through hwfarmd") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2);
  // Given a board that is unplugged after its image printed BEGIN,
  json::object r = runOnFaulty(dir, d, "unplug").record;
  INFO(json::serialize(r));
  // its attempt is the lab's failure (the firmware cannot close a console),
  // and the image runs again on the other board, which passes.
  const json::array& attempts = r.at("attempts").as_array();
  REQUIRE(attempts.size() == 2);
  CHECK(attempts[0].at("board").as_string() == "fake-1");
  CHECK(attempts[0].at("failure_class").as_string() == "infrastructure");
  CHECK(attempts[0].at("reason").as_string() == "the console closed mid-run (BEGIN but no END): end of file");
  CHECK(attempts[0].at("retried").as_bool());
  CHECK(attempts[1].at("board").as_string() == "fake-2");
  CHECK(attempts[1].at("outcome").as_string() == "pass");
  CHECK(r.at("state").as_string() == "passed");
}

TEST_CASE("images failing on every board swap one board per failed board, and a lease no more than its hourly limit") {
  // Given four boards of a type whose flashers all fail, swaps limited to one an hour
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\nmax_swaps_per_hour = 1\n") +
                           fakeBoard(dir, 1) + fakeBoard(dir, 2) + fakeBoard(dir, 3) + fakeBoard(dir, 4));
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2), b3 = plugIn(dir, 3), b4 = plugIn(dir, 4);
  for (int n = 1; n <= 4; ++n) {
    REQUIRE(waitState(d, "fake-" + std::to_string(n), "available"));
    setMode(dir, n, "flash-fail");
  }
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  REQUIRE(leaseBoards(d, lease) == std::vector<std::string>{"fake-1"});
  std::string image = upload(d, lease, kPass);
  auto recovering = [&] {
    int n = 0;
    for (int b = 1; b <= 4; ++b) n += stateOf(d, "fake-" + std::to_string(b)) != "available" &&
                                      stateOf(d, "fake-" + std::to_string(b)) != "leased";
    return n;
  };
  // When a run of three images fails on its board and on the board swapped in
  auto r = d.request("POST", "/v1/leases/" + lease + "/runs",
                     R"({"images":[{"image":")" + image + R"(","name":"a.bin"},{"image":")" + image +
                         R"(","name":"b.bin"},{"image":")" + image + R"(","name":"c.bin"}],"reference":"none"})",
                     "");
  REQUIRE(r.status == 201);
  json::object first = json::parse(d.recordAtEnd(std::string(json::parse(r.body).at("id").as_string()))).as_object();
  INFO(json::serialize(first));
  // Then one board was swapped in, and it was never swapped out in turn
  CHECK(first.at("state").as_string() == "error");
  const json::array& attempts = first.at("attempts").as_array();
  REQUIRE(attempts.size() == 4); // a on fake-1, its retry, b and c on the board swapped in
  CHECK(attempts[0].at("board").as_string() == "fake-1");
  std::string in(attempts[1].at("board").as_string());
  CHECK(in != "fake-1");
  CHECK(attempts[1].at("retry_of_board").as_string() == "fake-1");
  for (size_t i = 1; i < 4; ++i) {
    CHECK(attempts[i].at("board").as_string() == in);
    CHECK(attempts[i].at("failure_class").as_string() == "infrastructure");
  }
  for (size_t i = 2; i < 4; ++i)
    CHECK(attempts[i].at("not_retried").as_string() ==
          in + " was swapped in for fake-1 in this run: a run swaps one board per failed board");
  CHECK(leaseBoards(d, lease) == std::vector<std::string>{in});
  CHECK(recovering() <= 1);
  // When the lease runs them again within the hour
  r = d.request("POST", "/v1/leases/" + lease + "/runs",
                R"({"images":[{"image":")" + image + R"(","name":"a.bin"}],"reference":"none"})", "");
  REQUIRE(r.status == 201);
  json::object second = json::parse(d.recordAtEnd(std::string(json::parse(r.body).at("id").as_string()))).as_object();
  INFO(json::serialize(second));
  // Then the failure stands on the lease's board: the hourly limit is spent
  CHECK(second.at("state").as_string() == "error");
  REQUIRE(second.at("attempts").as_array().size() == 1);
  std::string why(second.at("attempts").as_array()[0].at("not_retried").as_string());
  CHECK(why.find("(leases.max_swaps_per_hour = 1)") != std::string::npos);
  CHECK(leaseBoards(d, lease) == std::vector<std::string>{in});
  CHECK(recovering() <= 1); // of four boards, at most the first left service
}

TEST_CASE("a USB board without a power switch runs from its flasher's reset, in a run and in its health check") {
  TempDir dir;
  // Given a board with power.driver = "none" whose flasher resets it, and
  // a health image that prints the banner,
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") + healthBoard(dir));
  Process board = plugIn(dir, 3);
  // its health check passes: flashed, its banner read from the flash on,
  // never powered (it has nothing to switch), and a run on it passes the
  // same way: no power step, so no infrastructure failure of a switch it
  // does not have.
  std::string lease;
  json::object r = leaseAndRun(d, lease);
  INFO(json::serialize(r));
  CHECK(r.at("state").as_string() == "passed");
  const json::array& attempts = r.at("attempts").as_array();
  REQUIRE(attempts.size() == 1);
  CHECK(attempts[0].at("outcome").as_string() == "pass");
  CHECK_FALSE(fs::exists(dir.file("state/consoles/" + lease + "/power__fake-3.txt")));
  std::string trace = readFile(dir.file("state/runs/" + std::string(r.at("id").as_string()) + "/traces/fw__bare.txt"));
  CHECK(trace.find("HWFARM END status=0") != std::string::npos);
}

TEST_CASE("verdict: a switched board whose flasher resets it holds one boot in its console, through hwfarmd") {
  TempDir dir;
  // Given a board with a power switch whose flasher also resets it (as
  // openocd, st-flash and nrfjprog do), so the image boots once already,
  // printing a line every 100 ms ("slow") on into its power switch's off,
  // which takes half a second,
  std::string sock = dir.file("fake1.sock");
  auto tool = [&](const std::string& args) {
    return "[\"/bin/sh\", \"-c\", \"" + args + "\", \"" FAKE_BOARD_PATH "\", \"" + sock + "\"]";
  };
  std::string board = withLine(
      withLine(fakeBoard(dir, 1), "flash",
               "  flash = { driver = \"command\", argv = [\"" FAKE_BOARD_PATH "\", \"flash\", \"" + sock +
                   "\", \"{image}\", \"reset\"], timeout_s = 5 }\n"),
      "power",
      "  power = { driver = \"command\", on = " + tool("exec \\\"$0\\\" power \\\"$1\\\" on") +
          ", off = " + tool("sleep 0.5 && exec \\\"$0\\\" power \\\"$1\\\" off") + ", off_s = 0.1 }\n");
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") + board);
  Process plugged = plugIn(dir, 1);
  REQUIRE(waitState(d, "fake-1", "available"));
  setMode(dir, 1, "slow");
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  std::string image = upload(d, lease, kPass);
  // when it runs, the board boots twice (its console log has both boots),
  json::object r = run(d, lease, image);
  INFO(json::serialize(r));
  std::string console = readFile(dir.file("state/consoles/" + lease + "/fake-1.log"));
  INFO(console);
  CHECK(console.find("boot 1") != std::string::npos);
  CHECK(console.find("boot 2") != std::string::npos);
  // and its attempt holds the boot of the power-on only: what the
  // flasher's boot printed is neither a second BEGIN nor records after
  // END, nor the result. The run passes on the second boot.
  CHECK(r.at("state").as_string() == "passed");
  const json::array& attempts = r.at("attempts").as_array();
  REQUIRE(attempts.size() == 1);
  CHECK(attempts[0].at("outcome").as_string() == "pass");
  std::string trace = readFile(dir.file("state/runs/" + std::string(r.at("id").as_string()) + "/traces/fw__fake.txt"));
  INFO(trace);
  CHECK(trace.find("boot 1") == std::string::npos);
  CHECK(trace.find("boot 2") != std::string::npos);
  CHECK(occurrences(trace, "HWFARM BEGIN") == 1);
}

TEST_CASE("a health check ends after its flasher does: a banner printed while the flasher still runs does not free "
          "the board") {
  TempDir dir;
  // Given a board without a power switch whose flasher resets it (the
  // health image's banner comes at once) and then goes on for a second
  // (a real flasher verifying, detaching, exiting),
  std::string slow = "  flash = { driver = \"command\", argv = [\"/bin/sh\", \"-c\", \"\\\"$0\\\" flash \\\"$1\\\" "
                     "\\\"$2\\\" reset && sleep 1\", \"" FAKE_BOARD_PATH "\", \"" + dir.file("fake3.sock") +
                     "\", \"{image}\"], timeout_s = 5 }\n";
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 0, "[leases]\nrecovery_s = 0\n") + healthBoard(dir, slow));
  Process plugged = plugIn(dir, 3);
  // when its health check passes and it is leased at once, the run's
  // flash finds the board free: the check's flasher had ended before the
  // board became available.
  std::string lease;
  json::object r = leaseAndRun(d, lease);
  INFO(json::serialize(r));
  CHECK(r.at("state").as_string() == "passed");
  CHECK(json::serialize(r).find("busy") == std::string::npos);
}

TEST_CASE("a cancel during a run's finishing is refused with run_ended and the run keeps its verdict, and one before wins") {
  TempDir dir;
  // Given a daemon whose writes of summary.json the test can hold (the run's
  // verdict is decided and its files are being written),
  std::string hold = dir.file("hold");
  RunningDaemon d(dir, fleet(dir),
                  {{"LD_PRELOAD", FAILSYNC_PATH}, {"HWFARM_HOLD_SYNC", hold}, {"HWFARM_HOLD_SYNC_MATCH", "summary.json.tmp"}});
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2);
  REQUIRE(waitState(d, "fake-1", "available"));
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  std::string image = upload(d, lease, kPass);
  auto start = [&] {
    auto r = d.request("POST", "/v1/leases/" + lease + "/runs",
                       R"({"images":[{"image":")" + image + R"(","name":"fw.bin"}],"reference":"none"})", "");
    INFO(r.body);
    REQUIRE(r.status == 201);
    return std::string(json::parse(r.body).at("id").as_string());
  };
  dir.write("hold", "");
  std::string id = start();
  // when its passing run is held writing its files,
  bool held = false;
  for (int i = 0; i < 3000 && !held; ++i) {
    held = fs::exists(hold + ".held");
    if (!held) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(held);
  // a cancel is refused: run_ended, naming the state it ends in,
  auto refused = d.request("DELETE", "/v1/runs/" + id, "", "");
  INFO(refused.body);
  CHECK(refused.status == 409);
  json::value error = json::parse(refused.body);
  CHECK(error.at("error").as_string() == "run_ended");
  CHECK(error.at("detail").as_string() == "run " + id +
                                              " has already ended (passed): its verdict was decided before the "
                                              "cancel; its files are being written");
  // and once the write goes on the run ends passed, no cancel in its record.
  fs::remove(hold);
  json::object ended = json::parse(d.recordAtEnd(id)).as_object();
  CHECK(ended.at("state").as_string() == "passed");
  CHECK_FALSE(ended.contains("cancelling"));
  auto after = d.request("DELETE", "/v1/runs/" + id, "", "");
  CHECK(after.status == 409);
  CHECK(json::parse(after.body).at("detail").as_string() == "run " + id + " has already ended (passed)");

  // A cancel while the board runs wins: the answer says so, the run ends cancelled.
  setMode(dir, 1, "stall");
  std::string stalled = start();
  for (int i = 0; i < 3000; ++i) {
    json::value r = json::parse(d.get("/v1/runs/" + stalled).body);
    if (r.at("attempts").as_array().size() == 1 && r.at("attempts").at(0).at("phase").as_string() == "running") break;
    std::this_thread::sleep_for(10ms);
  }
  auto won = d.request("DELETE", "/v1/runs/" + stalled, "", "");
  INFO(won.body);
  REQUIRE(won.status == 200);
  json::value answer = json::parse(won.body);
  CHECK(answer.at("cancelling").as_bool());
  CHECK(answer.at("reason").as_string() == "cancelled by anonymous");
  // (its running board stopped at once, so the verdict is decided: a second
  // cancel is refused, naming it)
  auto again = d.request("DELETE", "/v1/runs/" + stalled, "", "");
  CHECK(again.status == 409);
  CHECK(json::parse(again.body).at("detail").as_string().rfind("run " + stalled + " has already ended (cancelled)", 0) == 0);
  json::object cancelled = json::parse(d.recordAtEnd(stalled)).as_object();
  CHECK(cancelled.at("state").as_string() == "cancelled");
  CHECK(cancelled.at("attempts").at(0).at("cancelled").as_bool());
}

namespace {

// fleet() with a QEMU reference for type fake, and sim-0, a simulated board.
std::string referenceFleet(const TempDir& dir) {
  return qemuFleet(dir.file("state"), 1, "[leases]\nrecovery_s = 0\n") + fakeBoard(dir, 1) + fakeBoard(dir, 2) +
         "\n[[reference]]\ntype = \"fake\"\nmachine = \"mps2-an385\"\n";
}

// What test firmware `variant` prints as a run's target: its console on
// sim-0, in a run of its own that passed.
std::string targetConsole(const TempDir& dir, const RunningDaemon& d, const std::string& variant) {
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  json::object r = run(d, lease, upload(d, lease, readFile(firmware(variant)), "fw.elf"));
  INFO(json::serialize(r));
  REQUIRE(r.at("state").as_string() == "passed");
  std::string console;
  for (const auto& f : fs::directory_iterator(dir.file("state/runs/" + std::string(r.at("id").as_string()) + "/traces")))
    console += readFile(f.path().string());
  REQUIRE(d.request("DELETE", "/v1/leases/" + lease, "", "").status == 200);
  REQUIRE(console.find("HWFARM END status=0") != std::string::npos);
  return console;
}

// A run of `image` (what the fake board prints) on the lease's board
// against the QEMU reference running `reference` (test firmware).
json::object runAgainst(const RunningDaemon& d, const std::string& lease, const std::string& image,
                        const std::string& reference, const std::string& deadline_s = "5") {
  std::string ref = upload(d, lease, readFile(firmware(reference)), reference + ".elf");
  return ranToEnd(d, lease,
                  R"({"images":[{"image":")" + image + R"(","name":"fw.bin","reference_image":")" + ref +
                      R"("}],"reference":"qemu","deadline_s":)" + deadline_s + "}");
}

// The attempts of a run's record on `board` (the reference's: "").
std::vector<json::object> attemptsOn(const json::object& record, const std::string& board) {
  std::vector<json::object> out;
  for (const auto& a : record.at("attempts").as_array()) {
    bool ref = a.at("reference").as_bool();
    if (ref ? board.empty() : !board.empty() && a.at("board").as_string() == board) out.push_back(a.as_object());
  }
  return out;
}

int64_t infraFailures(const RunningDaemon& d) {
  return json::parse(d.get("/v1/sla").body).at("ratio").at("infra_failures").as_int64();
}

} // namespace

TEST_CASE("verdict: noise only is the lab's when the reference printed records, the firmware's when it printed noise "
          "too, through hwfarmd") {
  TempDir dir;
  RunningDaemon d(dir, referenceFleet(dir));
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2);
  // Given boards that print what the pass firmware prints on a simulated
  // board, and fake-1's console read at the wrong baud rate (noise only),
  std::string lease = leaseFirst(d);
  std::string image = upload(d, lease, targetConsole(dir, d, "pass"));
  setMode(dir, 1, "noise");
  // when the reference prints its records, the noise is the lab's: the
  // attempt is retried on fake-2, which passes, and the SLA counts it.
  json::object r = runAgainst(d, lease, image, "pass");
  INFO(json::serialize(r));
  CHECK(attemptsOn(r, "").at(0).at("outcome").as_string() == "pass");
  std::vector<json::object> first = attemptsOn(r, "fake-1");
  REQUIRE(first.size() == 1);
  CHECK(first[0].at("failure_class").as_string() == "infrastructure");
  CHECK(first[0].at("reason").as_string().find("no result records (no BEGIN): 4 lines of other output") == 0);
  CHECK(first[0].at("reason").as_string().find("(the reference printed its records)") != std::string::npos);
  CHECK(first[0].at("retried").as_bool());
  std::vector<json::object> retry = attemptsOn(r, "fake-2");
  REQUIRE(retry.size() == 1);
  CHECK(retry[0].at("outcome").as_string() == "pass");
  CHECK(r.at("state").as_string() == "passed");
  CHECK(infraFailures(d) == 1);
  // When the firmware prints noise on the reference too (and never ends),
  // the same noise is the firmware's: not retried, no board swapped,
  // nothing for the SLA.
  REQUIRE(leaseBoards(d, lease) == std::vector<std::string>{"fake-2"});
  setMode(dir, 2, "noise");
  json::object n = runAgainst(d, lease, image, "noise");
  INFO(json::serialize(n));
  std::vector<json::object> own = attemptsOn(n, "fake-2");
  REQUIRE(own.size() == 1);
  CHECK(attemptsOn(n, "fake-1").empty());
  CHECK(own[0].at("failure_class").as_string() == "test");
  CHECK(own[0].at("reason").as_string().find("(the reference printed none either)") != std::string::npos);
  CHECK_FALSE(own[0].contains("retried"));
  CHECK(n.at("state").as_string() == "failed");
  CHECK(n.at("failure_class").as_string() == "test");
  CHECK(leaseBoards(d, lease) == std::vector<std::string>{"fake-2"});
  CHECK(infraFailures(d) == 1);
}

TEST_CASE("verdict: a reference that timed out while the target completed is reference incomplete, through hwfarmd") {
  TempDir dir;
  RunningDaemon d(dir, referenceFleet(dir));
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2);
  // Given a board that runs the pass firmware through, and a reference
  // build that hangs after its first case,
  std::string lease = leaseFirst(d);
  std::string image = upload(d, lease, targetConsole(dir, d, "pass"));
  json::object r = runAgainst(d, lease, image, "hang", "3");
  INFO(json::serialize(r));
  // the reference is incomplete: not the target's own failure, and not
  // the lab's (the simulator ran; the image hung on it).
  CHECK(attemptsOn(r, "").at(0).at("failure_class").as_string() == "test");
  std::vector<json::object> target = attemptsOn(r, "fake-1");
  REQUIRE(target.size() == 1);
  std::string reason(target[0].at("reason").as_string());
  CHECK(reason.find("reference incomplete: the reference qemu_ref: BEGIN but no END before the deadline") == 0);
  CHECK(reason.find("; the target completed") != std::string::npos);
  CHECK(target[0].at("failure_class").as_string() == "test");
  CHECK_FALSE(target[0].contains("retried"));
  // The cases the reference printed compare; those it never printed are
  // not compared, never "missing".
  std::string junit = readFile(dir.file("state/runs/" + std::string(r.at("id").as_string()) + "/junit.xml"));
  CHECK(junit.find("not compared: the reference did not complete") != std::string::npos);
  CHECK(junit.find("output missing") == std::string::npos);
  CHECK(r.at("state").as_string() == "failed");
  CHECK(infraFailures(d) == 0);
  CHECK(leaseBoards(d, lease) == std::vector<std::string>{"fake-1"});
}

TEST_CASE("verdict: a test failure is never hidden by another target's infrastructure failure, through hwfarmd") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process b1 = plugIn(dir, 1), b2 = plugIn(dir, 2);
  REQUIRE(waitState(d, "fake-1", "available"));
  REQUIRE(waitState(d, "fake-2", "available"));
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"count":2,"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  std::string lease(json::parse(granted.body).at("id").as_string());
  // Given an image that fails its own test, run on both boards, and
  // fake-1's flasher broken (no retry),
  setMode(dir, 1, "flash-fail");
  std::string image = upload(d, lease, "HWFARM BEGIN suite=fake\nHWFARM TEST t FAIL expected 3 got 4\nHWFARM END status=1\n");
  json::object r = run(d, lease, image, R"(,"retry":false,"mode":"each")");
  INFO(json::serialize(r));
  // the run fails as the firmware's (exit 10 for hwfarmctl), never error,
  CHECK(r.at("state").as_string() == "failed");
  CHECK(r.at("failure_class").as_string() == "test");
  // and the flasher's failure stays in its attempt, the lab's, counted.
  std::vector<json::object> broken = attemptsOn(r, "fake-1"), failing = attemptsOn(r, "fake-2");
  REQUIRE(broken.size() == 1);
  REQUIRE(failing.size() == 1);
  CHECK(broken[0].at("failure_class").as_string() == "infrastructure");
  CHECK(failing[0].at("failure_class").as_string() == "test");
  CHECK(failing[0].at("reason").as_string() == "t: FAIL: expected 3 got 4");
  CHECK(infraFailures(d) == 1);
  std::string junit = readFile(dir.file("state/runs/" + std::string(r.at("id").as_string()) + "/junit.xml"));
  CHECK(junit.find("<failure") != std::string::npos);
  CHECK(junit.find("<error") != std::string::npos);
}
