// A board that is not QEMU: the fault-injection fake board behind a pty,
// leased, flashed and powered through hwfarmd's real USB-board path
// (command flasher and power switch, tty console, presence by its
// /dev/serial/by-id-style link), and made to fail on command.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string fleet(const TempDir& dir, bool power_switch = true) {
  std::string sock = dir.file("fake.sock"), link = dir.file("ttyFAKE0");
  // Images are named by server-side path, so their directory is an image root.
  std::string text = qemuFleet(dir.file("state"), 0, "image_roots = [\"" + dir.path() + "\"]\n[leases]\nrecovery_s = 0\n") +
                     "  [[worker.board]]\n  name = \"fake-1\"\n  type = \"fake\"\n"
                     "  usb = { vendor = \"1209\", product = \"0001\", serial = \"FAKE0001\" }\n"
                     "  serial = { port = \"" + link + "\" }\n"
                     "  flash = { driver = \"command\", argv = [\"" FAKE_BOARD_PATH "\", \"flash\", \"" + sock +
                     "\", \"{image}\"], timeout_s = 1 }\n";
  if (power_switch)
    text += "  power = { driver = \"command\", on = [\"" FAKE_BOARD_PATH "\", \"power\", \"" + sock +
            "\", \"on\"], off = [\"" FAKE_BOARD_PATH "\", \"power\", \"" + sock + "\", \"off\"] }\n";
  else
    text += "  power = { driver = \"none\" }\n";
  return text;
}

std::string boardState(const RunningDaemon& d) {
  json::value boards = json::parse(d.get("/v1/boards").body);
  return std::string(boards.at("boards").at(0).at("state").as_string());
}

bool waitState(const RunningDaemon& d, const std::string& state) {
  for (int i = 0; i < 300; ++i) {
    if (boardState(d) == state) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Starts the fake board: its device link appears.
Process plugIn(const TempDir& dir) {
  return Process({FAKE_BOARD_PATH, "serve", "--link", dir.file("ttyFAKE0"), "--control", dir.file("fake.sock")},
                 dir.file("board.out"), dir.file("board.err"));
}

// Waits for the fake board to be available and leases it; returns the id.
std::string leaseTheBoard(const RunningDaemon& d) {
  REQUIRE(waitState(d, "available"));
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual"})", "");
  REQUIRE(granted.status == 201);
  return std::string(json::parse(granted.body).at("id").as_string());
}

// True once the board's flasher (`fake_board flash SOCK ...`) runs, as
// hwfarmd's child; false after 10 s.
bool waitFlasherRunning(const std::string& sock) {
  for (int i = 0; i < 1000; ++i) {
    std::error_code ec;
    for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
      std::string argv = readFile(it->path().string() + "/cmdline");
      if (argv.rfind(std::string(FAKE_BOARD_PATH) + '\0' + "flash" + '\0' + sock + '\0', 0) == 0) return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Every path under `dir`, relative to it.
std::set<std::string> tree(const std::string& dir) {
  std::set<std::string> paths;
  for (const auto& e : fs::recursive_directory_iterator(dir)) paths.insert(fs::relative(e.path(), dir).string());
  return paths;
}

} // namespace

TEST_CASE("a fake board comes and goes with its device link and fails on command") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  const std::string acquire = R"({"selector":{"type":"fake"},"context":"manual","ttl_s":60})";
  // Not plugged in: offline, and nothing to lease.
  REQUIRE(boardState(d) == "offline");
  REQUIRE(d.request("POST", "/v1/leases", acquire, "").status == 408);

  // Plugged in: present, recovered, available.
  Process board({FAKE_BOARD_PATH, "serve", "--link", dir.file("ttyFAKE0"), "--control", dir.file("fake.sock")},
                dir.file("board.out"), dir.file("board.err"));
  REQUIRE(waitState(d, "available"));
  auto granted = d.request("POST", "/v1/leases", acquire, "");
  REQUIRE(granted.status == 201);
  json::value lease = json::parse(granted.body);
  std::string id(lease.at("id").as_string());
  REQUIRE(lease.at("boards").at(0).at("usb_serial").as_string() == "FAKE0001");
  REQUIRE(lease.at("boards").at(0).at("serial_port").as_string() == dir.file("ttyFAKE0"));
  std::string base = "/v1/leases/" + id + "/boards/fake-1/";

  // Flash an "image" and power on: the console shows it.
  std::string image = dir.write("image.bin", "HWFARM BEGIN suite=fake\nHWFARM TEST t PASS\nHWFARM END\n");
  REQUIRE(d.request("POST", base + "flash", "{\"image\":\"" + image + "\"}", "").status == 200);
  REQUIRE(d.request("POST", base + "power", R"({"action":"on"})", "").status == 200);
  std::string console = dir.file("state/consoles/" + id + "/fake-1.log");
  REQUIRE(waitForText(console, "] HWFARM END\n", 10s));

  SECTION("no path tricks reach the board or a file outside the image root") {
    // Given an image outside the image root, and another inside it,
    TempDir outside;
    std::string secret = outside.write("secret.bin", "HWFARM BEGIN suite=SECRET\nHWFARM END\n");
    std::string other = dir.write("other.bin", "HWFARM BEGIN suite=OTHER\nHWFARM END\n");
    auto flashBody = [](const std::string& path) { return json::serialize(json::object{{"image", path}}); };
    auto refusal = [](const std::string& error, const std::string& detail) {
      return json::value(json::object{{"error", error}, {"detail", detail}});
    };
    std::string lease_dir = dir.file("state/consoles/" + id);
    auto before = tree(lease_dir);
    // dot segments are not resolved: a path that would name this board's
    // flash route once resolved names no route,
    std::string dotted = base + "../fake-1/flash";
    auto r = d.request("POST", dotted, flashBody(other), "");
    CHECK(r.status == 404);
    CHECK(json::parse(r.body) == refusal("not_found", "no such endpoint: " + dotted));
    // a board named by a path is no board of the lease,
    for (std::string name : {"..", "..%2F..%2Ffake-1"}) {
      r = d.request("POST", "/v1/leases/" + id + "/boards/" + name + "/flash", flashBody(other), "");
      CHECK(r.status == 404);
      CHECK(json::parse(r.body) == refusal("not_found", "board " + name + " is not in lease " + id));
    }
    // and an image path that starts in the image root but leads out of it,
    // by "..", or by a symbolic link, is refused by where it leads.
    std::string climbing = dir.path() + "/../" + fs::path(outside.path()).filename().string() + "/secret.bin";
    fs::create_symlink(secret, dir.file("link.bin"));
    for (const std::string& path : {climbing, dir.file("link.bin")}) {
      r = d.request("POST", base + "flash", flashBody(path), "");
      CHECK(r.status == 403);
      CHECK(json::parse(r.body) == refusal("image_path_refused", "image " + path + " is not under agent.image_roots (" +
                                                                     dir.path() + "): upload it instead"));
    }
    // Nothing was written: not in the lease's directory (no image copied, no
    // flash logged), not outside;
    CHECK(tree(lease_dir) == before);
    CHECK(tree(outside.path()) == std::set<std::string>{"secret.bin"});
    // and the board still runs the image flashed first.
    REQUIRE(d.request("POST", base + "power", R"({"action":"cycle"})", "").status == 200);
    std::string text;
    for (int i = 0; i < 1000 && occurrences(text, "] HWFARM END\n") < 2; ++i) {
      std::this_thread::sleep_for(10ms);
      text = readFile(console);
    }
    REQUIRE(occurrences(text, "] HWFARM END\n") == 2);
    CHECK(occurrences(text, "HWFARM BEGIN suite=fake") == 2);
    CHECK(text.find("SECRET") == std::string::npos);
    CHECK(text.find("OTHER") == std::string::npos);
  }
  SECTION("a flasher that fails reports its status and output") {
    runCommand({FAKE_BOARD_PATH, "mode", dir.file("fake.sock"), "flash-fail"});
    auto r = d.request("POST", base + "flash", "{\"image\":\"" + image + "\"}", "");
    REQUIRE(r.status == 502);
    std::string detail(json::parse(r.body).at("detail").as_string());
    REQUIRE(detail.find("flashing board fake-1: exited with status 1; output: error: verify failed at 0x08000000") == 0);
  }
  SECTION("a flasher that hangs is killed at its timeout and the board is busy meanwhile") {
    runCommand({FAKE_BOARD_PATH, "mode", dir.file("fake.sock"), "flash-hang"});
    hwfarm::cli::HttpResult slow_result;
    std::string slow_error;
    std::thread slow([&] { // no Catch2 macros off the main thread: the result is checked below
      try {
        slow_result = d.request("POST", base + "flash", "{\"image\":\"" + image + "\"}", "");
      } catch (const std::exception& e) {
        slow_error = e.what();
      }
    });
    bool flasher_ran = waitFlasherRunning(dir.file("fake.sock"));
    auto busy = d.request("POST", base + "power", R"({"action":"cycle"})", "");
    slow.join();
    REQUIRE(flasher_ran);
    REQUIRE(slow_error == "");
    CHECK(slow_result.status == 502);
    CHECK(json::parse(slow_result.body).at("detail").as_string() == "flashing board fake-1: killed after its 1 s timeout");
    REQUIRE(busy.status == 409);
    REQUIRE(json::parse(busy.body).at("detail").as_string() == "board fake-1 is busy (flash in progress)");
  }
  SECTION("garbage on the console is kept in the trace") {
    runCommand({FAKE_BOARD_PATH, "mode", dir.file("fake.sock"), "garbage"});
    REQUIRE(d.request("POST", base + "power", R"({"action":"cycle"})", "").status == 200);
    REQUIRE(waitForText(console, "garbage", 10s));
  }
  SECTION("a board that vanishes while leased is lost to its lease") {
    runCommand({FAKE_BOARD_PATH, "mode", dir.file("fake.sock"), "vanish"});
    REQUIRE(waitState(d, "offline"));
    json::value after = json::parse(d.get("/v1/leases/" + id).body);
    REQUIRE(after.at("state").as_string() == "active");
    REQUIRE(after.at("boards").at(0).at("status").as_string() == "lost");
    REQUIRE(after.at("boards").at(0).as_object().contains("lost_at"));
    REQUIRE(d.log().find("board fake-1 vanished while leased by lease " + id + ": infrastructure failure") !=
            std::string::npos);
    REQUIRE(waitForText(console, "-- console closed: ", 5s));
    auto r = d.request("POST", base + "power", R"({"action":"on"})", "");
    REQUIRE(r.status == 409);
    REQUIRE(json::parse(r.body).at("error").as_string() == "board_lost");
  }
}

TEST_CASE("a board without a power switch refuses power actions instead of pretending") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir, false));
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  for (const char* action : {"on", "off", "cycle"}) {
    auto r = d.request("POST", "/v1/leases/" + id + "/boards/fake-1/power", std::string(R"({"action":")") + action + "\"}",
                       "");
    REQUIRE(r.status == 409);
    json::value body = json::parse(r.body);
    REQUIRE(body.at("error").as_string() == "not_supported");
    REQUIRE(body.at("detail").as_string() ==
            "board fake-1 has no power switch (power.driver = \"none\"); reflash it to restart its firmware");
  }
  // Nothing ran: no power log, and the board is still leased and usable.
  REQUIRE_FALSE(std::filesystem::exists(dir.file("state/consoles/" + id + "/power__fake-1.txt")));
  REQUIRE(boardState(d) == "leased");
  std::string image = dir.write("image.bin", "HWFARM BEGIN suite=fake\nHWFARM END\n");
  REQUIRE(d.request("POST", "/v1/leases/" + id + "/boards/fake-1/flash", "{\"image\":\"" + image + "\"}", "")
              .status == 200);
}

TEST_CASE("a reload that drops a board while it is being flashed waits for the flasher") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  runCommand({FAKE_BOARD_PATH, "mode", dir.file("fake.sock"), "flash-hang"});
  std::string image = dir.write("image.bin", "HWFARM BEGIN suite=fake\nHWFARM END\n");
  std::atomic<int> flash_status{0};
  std::thread flash([&] {
    try {
      flash_status = d.request("POST", "/v1/leases/" + id + "/boards/fake-1/flash", "{\"image\":\"" + image + "\"}", "")
                         .status;
    } catch (const std::exception&) {
      flash_status = -1; // no answer
    }
  });
  bool flasher_ran = waitFlasherRunning(dir.file("fake.sock")); // and hangs until its 1 s deadline
  // The board leaves the configuration while its flasher runs.
  dir.write("fleet.toml", qemuFleet(dir.file("state"), 1, "[leases]\nrecovery_s = 0\n"));
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));
  flash.join();
  REQUIRE(flasher_ran);
  REQUIRE(flash_status == 502); // the flasher's deadline, reported as before
  REQUIRE(d.process().running());
  REQUIRE(d.get("/v1/healthz").status == 200);
  json::value lease = json::parse(d.get("/v1/leases/" + id).body);
  REQUIRE(lease.at("state").as_string() == "revoked");
}
