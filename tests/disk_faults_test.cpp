// A real hwfarmd with a real (fake) board whose console floods a small
// state dir, and with its state dir made unusable under it (issue 9,
// items 13 and 14): console logs stop at their quotas and at the disk's
// reserve, the database keeps working, every disk error names its path,
// and no throw ends the daemon.
//
// The small disk is a tmpfs mounted by the test (it runs as root, as CI
// does); a test that cannot mount it fails.
#include <catch2/catch.hpp>

#include <sys/mount.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"
#include "tests/support/small_disk.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// The fake board (a pty console, a command power switch) on `state_dir`.
std::string fakeFleet(const TempDir& dir, const std::string& state_dir, const std::string& limits = "") {
  std::string sock = dir.file("fake.sock"), link = dir.file("ttyFAKE0");
  std::string text = qemuFleet(state_dir, 0, "[leases]\nrecovery_s = 0\n" + limits);
  return text + "  [[worker.board]]\n  name = \"fake-1\"\n  type = \"fake\"\n"
                "  usb = { vendor = \"1209\", product = \"0001\", serial = \"FAKE0001\" }\n"
                "  serial = { port = \"" + link + "\" }\n"
                "  flash = { driver = \"command\", argv = [\"" FAKE_BOARD_PATH "\", \"flash\", \"" + sock +
                "\", \"{image}\"], timeout_s = 10 }\n"
                "  power = { driver = \"command\", on = [\"" FAKE_BOARD_PATH "\", \"power\", \"" + sock +
                "\", \"on\"], off = [\"" FAKE_BOARD_PATH "\", \"power\", \"" + sock + "\", \"off\"], timeout_s = 30 }\n";
}

Process plugIn(const TempDir& dir) {
  return Process({FAKE_BOARD_PATH, "serve", "--link", dir.file("ttyFAKE0"), "--control", dir.file("fake.sock")},
                 dir.file("board.out"), dir.file("board.err"));
}

std::string boardState(const RunningDaemon& d) {
  auto r = d.get("/v1/boards");
  if (r.status != 200) return "";
  return std::string(json::parse(r.body).at("boards").at(0).at("state").as_string());
}

bool waitAvailable(const RunningDaemon& d) {
  for (int i = 0; i < 500; ++i) {
    if (boardState(d) == "available") return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::string acquire(const RunningDaemon& d) {
  REQUIRE(waitAvailable(d));
  auto r = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual","ttl_s":300})", "");
  INFO(r.body);
  REQUIRE(r.status == 201);
  return std::string(json::parse(r.body).at("id").as_string());
}

void release(const RunningDaemon& d, const std::string& id) {
  auto r = d.request("DELETE", "/v1/leases/" + id, "", "");
  INFO(r.body);
  REQUIRE(r.status == 200);
}

// Gives the fake board an image of `bytes` of console text (lines of 100
// characters): powering it on prints all of it.
void loadFlood(const TempDir& dir, size_t bytes) {
  std::string path = dir.file("flood.txt");
  {
    std::ofstream out(path);
    std::string line(99, 'x');
    for (size_t i = 0; i * 100 < bytes; ++i) out << line << "\n";
  }
  auto r = runCommand({FAKE_BOARD_PATH, "flash", dir.file("fake.sock"), path});
  REQUIRE(r.status.code == 0);
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Waits until the daemon's log holds `needle` `times` times.
bool waitLogged(const RunningDaemon& d, const std::string& needle, size_t times = 1) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (count(d.log(), needle) >= times) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Leases the board, floods its console, releases it.
void floodOnce(const RunningDaemon& d, std::string* id) {
  *id = acquire(d);
  auto r = d.request("POST", "/v1/leases/" + *id + "/boards/fake-1/power", R"({"action":"on"})", "", 60);
  INFO(r.body);
  REQUIRE(r.status == 200);
}

void leaseAndReleaseSeveralTimes(const RunningDaemon& d, int times) {
  for (int i = 0; i < times; ++i) release(d, acquire(d));
}

uint64_t sizeOf(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

} // namespace

TEST_CASE("a console flood stops at the per-lease and total quotas, logged once, and leases go on") {
  TempDir dir;
  SmallDisk disk(dir.file("state"), "8m");
  Process board = plugIn(dir);
  RunningDaemon d(dir, fakeFleet(dir, disk.dir,
                                 "[limits]\nconsole_log_bytes_per_lease = 1048576\n"
                                 "console_log_bytes_total = 2621440\ndisk_reserve_bytes = 1048576\n"));
  loadFlood(dir, 1536 * 1024);
  // Given a board that prints 1.5 MiB each time it powers on,
  std::string first, second, third;
  floodOnce(d, &first);
  // its first lease's log stops at 1 MiB, says why, and the log says it once.
  std::string log1 = disk.dir + "/consoles/" + first + "/fake-1.log";
  std::string per_lease = "console log " + log1 + ": limits.console_log_bytes_per_lease (1048576 bytes) reached; "
                          "later output is not kept";
  REQUIRE(waitLogged(d, per_lease));
  REQUIRE(waitForText(log1, "-- " + per_lease + " --\n", 5s));
  CHECK(sizeOf(log1) <= 1048576 + 512);
  CHECK(sizeOf(log1) >= 1048576 - 512);
  release(d, first);
  CHECK(count(d.log(), per_lease) == 1);
  CHECK(d.log().find("board fake-1, lease " + first + ": " + per_lease) != std::string::npos);

  // The next lease has its own 1 MiB,
  floodOnce(d, &second);
  std::string log2 = disk.dir + "/consoles/" + second + "/fake-1.log";
  REQUIRE(waitLogged(d, "console log " + log2 + ": limits.console_log_bytes_per_lease"));
  release(d, second);
  // and the third meets the total (2.5 MiB for all logs).
  floodOnce(d, &third);
  std::string log3 = disk.dir + "/consoles/" + third + "/fake-1.log";
  std::string total = "console log " + log3 + ": limits.console_log_bytes_total (2621440 bytes) reached; "
                      "later output is not kept";
  REQUIRE(waitLogged(d, total));
  REQUIRE(waitForText(log3, "-- " + total + " --\n", 5s));
  CHECK(sizeOf(log3) <= 512 * 1024 + 512);
  release(d, third);

  // The daemon keeps granting and releasing, and starts again with the
  // logs' bytes still counted.
  leaseAndReleaseSeveralTimes(d, 10);
  d.killAndRestart();
  leaseAndReleaseSeveralTimes(d, 10);
  std::string fourth;
  floodOnce(d, &fourth);
  std::string log4 = disk.dir + "/consoles/" + fourth + "/fake-1.log";
  REQUIRE(waitLogged(d, "console log " + log4 + ": limits.console_log_bytes_total (2621440 bytes) reached"));
  CHECK(sizeOf(log4) < 4096);
  release(d, fourth);
  CHECK(d.log().find("cannot commit") == std::string::npos);
}

TEST_CASE("a console flood leaves the disk's reserve to the database, which keeps working") {
  TempDir dir;
  SmallDisk disk(dir.file("state"), "4m");
  Process board = plugIn(dir);
  // Default quotas (far above this disk); 2 MiB kept free.
  RunningDaemon d(dir, fakeFleet(dir, disk.dir, "[limits]\ndisk_reserve_bytes = 2097152\n"));
  loadFlood(dir, 5 * 1024 * 1024);
  // Given a board that prints more than the whole disk holds,
  std::string id;
  floodOnce(d, &id);
  // capture stops near the reserve, saying where and why,
  std::string log = disk.dir + "/consoles/" + id + "/fake-1.log";
  std::regex reason("console log " + log + ": only [0-9]+ bytes free on " + disk.dir +
                    "/consoles, less than limits.disk_reserve_bytes \\(2097152\\); later output is not kept");
  REQUIRE(waitLogged(d, "less than limits.disk_reserve_bytes (2097152)"));
  CHECK(std::regex_search(d.log(), reason));
  REQUIRE(waitForText(log, "limits.disk_reserve_bytes (2097152); later output is not kept --\n", 5s));
  release(d, id);
  // and the database still has room: leases are granted and released,
  // and the daemon restarts on its state.
  leaseAndReleaseSeveralTimes(d, 20);
  d.killAndRestart();
  leaseAndReleaseSeveralTimes(d, 20);
  CHECK(d.log().find("cannot commit") == std::string::npos);
  CHECK(d.log().find("disk is full") == std::string::npos);
}

TEST_CASE("an unusable lease or board directory fails the request with its path, not the daemon") {
  TempDir dir;
  Process board = plugIn(dir);
  RunningDaemon d(dir, fakeFleet(dir, dir.file("state")));
  std::string id = acquire(d);
  // Given a file where the lease's log directory belongs,
  std::string lease_dir = dir.file("state/consoles/" + id);
  std::filesystem::create_directories(dir.file("state/consoles"));
  std::filesystem::remove_all(lease_dir);
  std::ofstream(lease_dir) << "in the way\n";
  REQUIRE(std::filesystem::is_regular_file(lease_dir));
  // power and the console say so, naming it,
  auto power = d.request("POST", "/v1/leases/" + id + "/boards/fake-1/power", R"({"action":"on"})", "");
  REQUIRE(power.status == 502);
  CHECK(json::parse(power.body).at("detail").as_string() ==
        "cannot create directory " + lease_dir + ": Not a directory");
  auto console = d.request("GET", "/v1/leases/" + id + "/boards/fake-1/console", "", "", 5);
  CHECK(console.body == "-- hwfarmd: cannot create directory " + lease_dir + ": Not a directory --\n");
  REQUIRE(d.get("/v1/healthz").status == 200);

  // Given a file where the board's work directory belongs (the flasher
  // runs on the board pool, where a throw used to end the daemon),
  std::filesystem::remove(lease_dir);
  std::string work_dir = dir.file("state/boards/fake-1");
  std::filesystem::create_directories(dir.file("state/boards"));
  std::filesystem::remove_all(work_dir);
  std::ofstream(work_dir) << "in the way\n";
  REQUIRE(std::filesystem::is_regular_file(work_dir));
  std::string image = dir.write("image.bin", "HWFARM END\n");
  auto flash = runCommand({HWFARMCTL_PATH, "--url", d.url(), "flash", id, "fake-1", image});
  INFO(flash.err);
  // the flash fails as an infrastructure failure naming it,
  CHECK(flash.status.code == 9);
  CHECK(flash.err.find("flash of board fake-1 failed: ") != std::string::npos);
  CHECK(flash.err.find(work_dir) != std::string::npos);
  // and the daemon serves on.
  REQUIRE(d.get("/v1/healthz").status == 200);
  release(d, id);
  leaseAndReleaseSeveralTimes(d, 3);
}

namespace {

// Starts hwfarmd with the fault injector; the log of a start that failed.
std::string failedStart(const TempDir& dir, const std::string& config, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> e = env;
  e["LD_PRELOAD"] = FAILSYNC_PATH;
  try {
    RunningDaemon d(dir, config, e);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  FAIL("hwfarmd started");
  return "";
}

} // namespace

// Issue 9, item 14: return values of chmod, EVP_Digest and
// libusb_hotplug_register_callback were ignored.
TEST_CASE("a chmod that fails stops start-up, naming its path") {
  TempDir dir;
  std::string state = dir.file("state");
  std::string log = failedStart(dir, qemuFleet(state, 1), {{"HWFARM_FAIL_CHMOD", state}});
  CHECK(log.find("cannot chmod 0750 state directory " + state + ": Operation not permitted") != std::string::npos);

  std::string sock = dir.file("api.sock");
  std::string config = std::regex_replace(qemuFleet(state, 1), std::regex("listen = \"127.0.0.1:0\""),
                                          "listen = [\"127.0.0.1:0\", \"unix:" + sock + "\"]");
  log = failedStart(dir, config, {{"HWFARM_FAIL_CHMOD", sock}});
  CHECK(log.find("cannot listen on unix:" + sock + ": chmod 0660 " + sock + ": Operation not permitted") !=
        std::string::npos);
}

TEST_CASE("a failed SHA-256 is an error, not an empty hash") {
  TempDir dir;
  std::string trigger = dir.write("digest-fails", "");
  std::string log = failedStart(dir, qemuFleet(dir.file("state"), 1), {{"HWFARM_FAIL_DIGEST", trigger}});
  CHECK(log.find("fatal: SHA-256 failed (OpenSSL EVP_Digest)") != std::string::npos);
}

// Issue 9, item 14: an exception escaping a handler ended the daemon.
TEST_CASE("a handler that throws answers 500, is logged, and the daemon serves on") {
  TempDir dir;
  std::string trigger = dir.file("digest-fails");
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1), {{"LD_PRELOAD", FAILSYNC_PATH}, {"HWFARM_FAIL_DIGEST", trigger}});
  // Given authentication failing inside the handler (a token's digest),
  std::ofstream(trigger) << "";
  auto r = d.request("GET", "/v1/boards", "", "some-token");
  // the request gets a 500 saying why,
  CHECK(r.status == 500);
  CHECK(json::parse(r.body) ==
        json::parse(R"J({"error":"internal_error","detail":"SHA-256 failed (OpenSSL EVP_Digest)"})J"));
  CHECK(d.log().find("GET /v1/boards failed: SHA-256 failed (OpenSSL EVP_Digest)") != std::string::npos);
  // and the daemon serves the next one.
  std::filesystem::remove(trigger);
  REQUIRE(d.get("/v1/boards").status == 200);
}

TEST_CASE("USB discovery whose hotplug registration fails says so") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1), {{"LD_PRELOAD", FAILSYNC_PATH}, {"HWFARM_FAIL_HOTPLUG", "1"}});
  CHECK(d.log().find("USB discovery unavailable (libusb_hotplug_register_callback failed: "
                     "LIBUSB_ERROR_NOT_SUPPORTED): boards with serial.port = \"auto\" stay offline") !=
        std::string::npos);
  REQUIRE(d.get("/v1/healthz").status == 200);
}

// Issue 9, item 13: on a full disk every restart failed with "database or
// disk is full", naming no file. Now hwfarmd keeps a ballast to free.
TEST_CASE("hwfarmd starts on a disk filled to the last block: it frees its ballast, says so, and takes work once space is freed") {
  TempDir dir;
  SmallDisk disk(dir.file("state"), "2m");
  std::string config = qemuFleet(disk.dir, 1, "[limits]\ndisk_reserve_bytes = 524288\n");
  auto lease = [](const RunningDaemon& d) {
    return d.request("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", "");
  };
  {
    // Given a daemon that made its ballast (a quarter of the reserve) and recorded leases
    RunningDaemon d(dir, config);
    CHECK(d.log().find("made the ballast " + disk.dir + "/.ballast (131072 bytes") != std::string::npos);
    for (int i = 0; i < 5; ++i) {
      auto r = lease(d);
      REQUIRE(r.status == 201);
      release(d, std::string(json::parse(r.body).at("id").as_string()));
    }
  }
  // and a disk then filled to the last block by something else,
  {
    std::ofstream filler(disk.dir + "/filler", std::ios::binary);
    std::string block(4096, 'f');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
  }
  // When hwfarmd starts, it removes the ballast, opens its database and serves
  RunningDaemon d(dir, config);
  INFO(d.log());
  CHECK(std::regex_search(d.log(), std::regex("removed the ballast " + disk.dir + "/.ballast \\(131072 bytes\\): only "
                                              "[0-9]+ bytes were free, too few to open the "
                                              "database")));
  CHECK(d.log().find("hwfarmd takes no new lease or run until space is freed") != std::string::npos);
  REQUIRE(d.get("/v1/healthz").status == 200);
  // and refuses new work while the disk is full
  CHECK(lease(d).status == 507);
  // Then once space is freed, leases are granted, and the next start makes the ballast again.
  std::filesystem::remove(disk.dir + "/filler");
  auto granted = lease(d);
  REQUIRE(granted.status == 201);
  release(d, std::string(json::parse(granted.body).at("id").as_string()));
  size_t before = d.log().size();
  d.killAndRestart();
  CHECK(d.log().substr(before).find("made the ballast " + disk.dir + "/.ballast (131072 bytes") != std::string::npos);
}
