// Leased simulated boards driven through hwfarmd: flash, power and console
// over the API and hwfarmctl, with real QEMU machines behind them.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>

#include <boost/json.hpp>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

std::string firmware(const std::string& variant) {
  return std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf";
}

json::value post(const RunningDaemon& d, const std::string& target, const std::string& body, int expect) {
  auto r = d.request("POST", target, body);
  INFO(target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return json::parse(r.body);
}

CommandResult ctl(const RunningDaemon& d, std::vector<std::string> args) {
  args.insert(args.begin(), {HWFARMCTL_PATH, "--url", d.url()});
  return runCommand(args, {{"HWFARM_TOKEN", ""}}, 60s);
}

// QEMU processes whose command line mentions `needle`.
int qemuProcesses(const std::string& needle) {
  int n = 0;
  DIR* proc = opendir("/proc");
  while (dirent* e = readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    std::string cmd = readFile(std::string("/proc/") + e->d_name + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find("qemu-system-arm") != std::string::npos && cmd.find(needle) != std::string::npos) ++n;
  }
  closedir(proc);
  return n;
}

// Leases the only board (sim-0), flashes the firmware that never ends and
// powers it on; returns once it runs. Returns the lease id.
std::string runHangFirmware(const RunningDaemon& d, const TempDir& dir) {
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(lease.at("id").as_string());
  std::string base = "/v1/leases/" + id + "/boards/sim-0/";
  REQUIRE(ctl(d, {"flash", id, "sim-0", firmware("hang")}).status.code == 0);
  post(d, base + "power", R"({"action":"on"})", 200);
  REQUIRE(waitForText(dir.file("state/consoles/" + id + "/sim-0.log"), "HWFARM BEGIN", 10s));
  return id;
}

} // namespace

TEST_CASE("two leased simulated boards of one type run firmware with separate consoles") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"count":2,"context":"manual"})", 201);
  std::string id(lease.at("id").as_string());
  std::string a(lease.at("boards").at(0).at("name").as_string()), b(lease.at("boards").at(1).at("name").as_string());
  // Given the pass firmware on one board and the fail firmware on the other,
  REQUIRE(ctl(d, {"flash", id, a, firmware("pass")}).status.code == 0);
  REQUIRE(ctl(d, {"flash", id, b, firmware("fail")}).status.code == 0);
  REQUIRE(ctl(d, {"power", id, a, "on"}).status.code == 0);
  REQUIRE(ctl(d, {"power", id, b, "on"}).status.code == 0);
  // each console shows its own run, to its end.
  auto ca = ctl(d, {"console", id, a});
  auto cb = ctl(d, {"console", id, b});
  REQUIRE(ca.status.code == 0);
  REQUIRE(ca.out.find("] HWFARM TEST ramp PASS\n") != std::string::npos);
  REQUIRE(ca.out.find("FAIL") == std::string::npos);
  REQUIRE(cb.out.find("] HWFARM TEST ramp FAIL expected 3 got 4\n") != std::string::npos);
  REQUIRE(std::regex_search(cb.out, std::regex("\\] HWFARM END\n")));
  // The consoles are kept per lease and board.
  std::string log_a = readFile(dir.file("state/consoles/" + id + "/" + a + ".log"));
  REQUIRE(log_a.find("] HWFARM END\n") != std::string::npos);
  REQUIRE(log_a.find("] -- console closed: end of file --\n") != std::string::npos);
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
}

TEST_CASE("power cycling a leased simulated board restarts its firmware and release stops it") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  std::string id = runHangFirmware(d, dir);
  std::string base = "/v1/leases/" + id + "/boards/sim-0/";
  std::string log = dir.file("state/consoles/" + id + "/sim-0.log");
  post(d, base + "power", R"({"action":"cycle"})", 200);
  std::string text;
  for (int i = 0; i < 500; ++i) {
    text = readFile(log);
    size_t first = text.find("HWFARM BEGIN");
    if (first != std::string::npos && text.find("HWFARM BEGIN", first + 1) != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  size_t first = text.find("hwfarm test firmware booting");
  REQUIRE(first != std::string::npos);
  REQUIRE(text.find("hwfarm test firmware booting", first + 1) != std::string::npos);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 1);
  // Releasing the lease stops the simulator.
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  for (int i = 0; i < 300 && qemuProcesses(dir.file("state/boards/sim-0/")) > 0; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 0);
}

TEST_CASE("board operations check the lease and report driver failures as infrastructure") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 2));
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(lease.at("id").as_string());
  std::string mine(lease.at("boards").at(0).at("name").as_string());
  std::string other = mine == "sim-0" ? "sim-1" : "sim-0";
  // A server-side path is refused (issue 9 item 3: no agent.image_roots here).
  auto missing = post(d, "/v1/leases/" + id + "/boards/" + mine + "/flash", R"({"image":"/nonexistent/fw.elf"})", 403);
  REQUIRE(missing.at("error").as_string() == "image_path_refused");
  auto off = post(d, "/v1/leases/" + id + "/boards/" + mine + "/power", R"({"action":"on"})", 502);
  REQUIRE(off.at("detail").as_string() == "board " + mine + " has no image: flash it first");
  post(d, "/v1/leases/" + id + "/boards/" + other + "/power", R"({"action":"on"})", 404);
  post(d, "/v1/leases/" + id + "/boards/" + mine + "/power", R"({"action":"toggle"})", 400);
  post(d, "/v1/leases/" + id + "/boards/" + mine + "/flash", R"({"image":"relative.elf"})", 400);
  post(d, "/v1/leases/nope/boards/" + mine + "/flash", R"({"image":"/x"})", 404);
  auto r = ctl(d, {"flash", id, mine, "/nonexistent/fw.elf"});
  REQUIRE(r.status.code == 2); // hwfarmctl uploads: a missing local file is a usage error
  auto console = ctl(d, {"console", id, mine});
  REQUIRE(console.out == "-- hwfarmd: the simulated board is off: power it on first --\n");
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  post(d, "/v1/leases/" + id + "/boards/" + mine + "/power", R"({"action":"on"})", 409);
}

TEST_CASE("a new lease of a simulated board does not boot the previous lease's image") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  auto first = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(first.at("id").as_string());
  REQUIRE(ctl(d, {"flash", id, "sim-0", firmware("pass")}).status.code == 0);
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  auto second = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":5})", 201);
  std::string id2(second.at("id").as_string());
  auto r = post(d, "/v1/leases/" + id2 + "/boards/sim-0/power", R"({"action":"on"})", 502);
  REQUIRE(r.at("detail").as_string() == "board sim-0 has no image: flash it first");
}

TEST_CASE("a simulator does not outlive a killed hwfarmd") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  runHangFirmware(d, dir);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 1);
  d.process().signal(SIGKILL);
  d.process().wait(10s);
  for (int i = 0; i < 300 && qemuProcesses(dir.file("state/boards/sim-0/")) > 0; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 0);
}
