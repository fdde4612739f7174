// Leased simulated boards driven through hwfarmd: flash, power and console
// over the API and hwfarmctl, with real QEMU machines behind them.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include <boost/json.hpp>
#include <regex>
#include <thread>

#include "tests/support/daemon_harness.h"
#include "tests/support/firmware.h"
#include "tests/support/wait.h"

using namespace hwfarm::test;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// These tests flash the test firmware by its path on the server.
const std::string kFirmwareRoot = "image_roots = [\"" HWFARM_FIRMWARE_DIR "\"]\n";

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

// QEMU processes (not their sandboxes) whose command line mentions `needle`.
int qemuProcesses(const std::string& needle) {
  int n = 0;
  DIR* proc = opendir("/proc");
  while (dirent* e = readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    std::string cmd = readFile(std::string("/proc/") + e->d_name + "/cmdline");
    std::string program = cmd.substr(0, cmd.find('\0'));
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (program.size() >= 15 && program.compare(program.size() - 15, 15, "qemu-system-arm") == 0 &&
        cmd.find(needle) != std::string::npos)
      ++n;
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
  // each console shows its own run, to its end: each firmware resets the
  // core after its END, which stops its simulator, and the console closes.
  auto ca = ctl(d, {"console", id, a});
  auto cb = ctl(d, {"console", id, b});
  REQUIRE(ca.status.code == 0);
  REQUIRE(ca.out.find("] HWFARM TEST ramp PASS\n") != std::string::npos);
  REQUIRE(ca.out.find("FAIL") == std::string::npos);
  REQUIRE(cb.out.find("] HWFARM TEST ramp FAIL expected 3 got 4\n") != std::string::npos);
  REQUIRE(std::regex_search(cb.out, std::regex("\\] HWFARM END status=1\n")));
  REQUIRE(ca.out.find("] HWFARM END status=0\n") != std::string::npos);
  // The consoles are kept per lease and board.
  REQUIRE(waitForText(dir.file("state/consoles/" + id + "/" + a + ".log"), "-- the firmware reset the simulator --",
                      5s));
  std::string log_a = readFile(dir.file("state/consoles/" + id + "/" + a + ".log"));
  REQUIRE(std::regex_search(log_a, std::regex("\\] HWFARM END status=0\n\\[[ 0-9.]+\\] -- console closed: end of "
                                               "file --\n\\[[ 0-9.]+\\] -- the firmware reset the simulator --\n")));
  REQUIRE(qemuProcesses(dir.file("state/boards/")) == 0);
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
  waitWhile([&] { return qemuProcesses(dir.file("state/boards/sim-0/")) > 0; }, 3s);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 0);
}

// What the board routes answer to a bad lease, board, action or image is
// tested in process (board_routes_test); here the client's side of it.
TEST_CASE("hwfarmctl refuses a missing image file and streams the console note of a board that is off") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1));
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(lease.at("id").as_string());
  auto r = ctl(d, {"flash", id, "sim-0", "/nonexistent/fw.elf"});
  REQUIRE(r.status.code == 2); // hwfarmctl uploads: a missing local file is a usage error
  auto console = ctl(d, {"console", id, "sim-0"});
  REQUIRE(console.status.code == 0);
  REQUIRE(console.out == "-- hwfarmd: the simulated board is off: power it on first --\n");
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
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
  waitWhile([&] { return qemuProcesses(dir.file("state/boards/sim-0/")) > 0; }, 3s);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 0);
}

namespace {

// A board on the `usb` path whose console "device" is `tty` (by default a
// plain file, present while it exists), flashed and powered by `flash` /
// `power` (TOML argv arrays).
std::string toolBoard(const TempDir& dir, const std::string& name, const std::string& flash,
                      const std::string& power, std::string tty = "") {
  std::string port = tty.empty() ? dir.write("tty-" + name, "") : tty;
  return "  [[worker.board]]\n  name = \"" + name + "\"\n  type = \"tool\"\n"
         "  usb = { vendor = \"1209\", product = \"0001\", serial = \"SN-" + name + "\" }\n"
         "  serial = { port = \"" + port + "\" }\n"
         "  flash = { driver = \"command\", argv = " + flash + ", timeout_s = 20 }\n"
         "  power = { driver = \"command\", on = " + power + ", off = " + power + " }\n";
}

bool waitFile(const std::string& path, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (::access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// hwfarmd's descriptors above stderr that are not close-on-exec, as "N -> target".
std::vector<std::string> inheritableDescriptors(pid_t pid) {
  std::vector<std::string> found;
  std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(fd_dir.c_str());
  while (dirent* e = readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0])) || std::atoi(e->d_name) <= 2) continue;
    std::string info = readFile("/proc/" + std::to_string(pid) + "/fdinfo/" + e->d_name);
    size_t at = info.find("flags:");
    if (at == std::string::npos) continue; // closed meanwhile
    unsigned long flags = std::stoul(info.substr(at + 6), nullptr, 8);
    if (flags & 02000000) continue; // O_CLOEXEC
    char target[256] = {};
    ssize_t n = ::readlink((fd_dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
    found.push_back(std::string(e->d_name) + " -> " + (n > 0 ? std::string(target, n) : "?"));
  }
  closedir(d);
  return found;
}

} // namespace

TEST_CASE("hwfarmd's children inherit none of its descriptors") {
  TempDir dir;
  const std::string list_fds = R"x(["/bin/sh", "-c", "echo fds $(ls /proc/self/fd)"])x";
  std::string qemu = dir.script("qemu-fds", "echo fds $(ls /proc/self/fd) >&2\nexec qemu-system-arm \"$@\"\n");
  std::string config = qemuFleet(dir.file("state"), 0, kFirmwareRoot + "[leases]\nrecovery_s = 0\n") +
                       "  [[worker.board]]\n  name = \"sim-0\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n"
                       "  qemu = { binary = \"" + qemu + "\" }\n" + toolBoard(dir, "tool-1", list_fds, list_fds);
  RunningDaemon d(dir, config);
  // Given a daemon with an idle client connection open (an accepted socket),
  // its database, logs and event loop descriptors,
  std::string port = d.url().substr(d.url().rfind(':') + 1);
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(d.get("/v1/healthz").status == 200); // accepted after the idle one (the backlog is in order)
  // every descriptor hwfarmd holds is close-on-exec,
  std::vector<std::string> inheritable = inheritableDescriptors(d.process().pid());
  INFO("inheritable: " << [&] {
    std::string all;
    for (auto& f : inheritable) all += f + "; ";
    return all;
  }());
  REQUIRE(inheritable.empty());
  // and a simulator, a flasher and a power switch it starts hold only
  // stdin, stdout and stderr (3: ls reading /proc/self/fd).
  auto sim = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string sim_lease(sim.at("id").as_string());
  post(d, "/v1/leases/" + sim_lease + "/boards/sim-0/flash", R"({"image":")" + firmware("hang") + "\"}", 200);
  post(d, "/v1/leases/" + sim_lease + "/boards/sim-0/power", R"({"action":"on"})", 200);
  REQUIRE(waitForText(dir.file("state/consoles/" + sim_lease + "/sim-0.log"), "HWFARM BEGIN", 10s));
  // (also with a console socket and its log open)
  REQUIRE(inheritableDescriptors(d.process().pid()).empty());
  auto tool = post(d, "/v1/leases", R"({"selector":{"type":"tool"},"context":"manual","wait_s":5})", 201);
  std::string tool_lease(tool.at("id").as_string());
  post(d, "/v1/leases/" + tool_lease + "/boards/tool-1/flash", R"({"image":")" + firmware("pass") + "\"}", 200);
  post(d, "/v1/leases/" + tool_lease + "/boards/tool-1/power", R"({"action":"on"})", 200);
  ::close(client);
  std::string qemu_log = readFile(dir.file("state/boards/sim-0/sim-0.qemu.log"));
  INFO("QEMU log: " << qemu_log);
  REQUIRE(qemu_log.find("fds 0 1 2 3\n") != std::string::npos);
  REQUIRE(readFile(dir.file("state/consoles/" + tool_lease + "/flash__tool-1.txt")) == "fds 0 1 2 3\n");
  REQUIRE(readFile(dir.file("state/consoles/" + tool_lease + "/power__tool-1.txt")) == "fds 0 1 2 3\n");
}

TEST_CASE("the event loop answers while a simulated board powers on slowly") {
  TempDir dir;
  std::string sock_dir = dir.file("state/boards/sim-0/sock");
  // Given a simulator that takes until the test says so to start,
  std::string qemu = dir.script("qemu-slow",
                            "touch " + sock_dir + "/started\nwhile [ ! -e " + sock_dir +
                                "/go ]; do sleep 0.02; done\nexec qemu-system-arm \"$@\"\n");
  std::string config = qemuFleet(dir.file("state"), 0, kFirmwareRoot) +
                       "  [[worker.board]]\n  name = \"sim-0\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n"
                       "  qemu = { binary = \"" + qemu + "\" }\n";
  RunningDaemon d(dir, config);
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(lease.at("id").as_string());
  std::string base = "/v1/leases/" + id + "/boards/sim-0/";
  post(d, base + "flash", R"({"image":")" + firmware("pass") + "\"}", 200);
  std::atomic<bool> powered{false};
  int power_status = 0;
  std::string power_error;
  std::thread power([&] { // no Catch2 macros off the main thread: checked after join
    try {
      power_status = d.request("POST", base + "power", R"({"action":"on"})").status;
    } catch (const std::exception& e) {
      power_error = e.what();
    }
    powered = true;
  });
  REQUIRE(waitFile(sock_dir + "/started"));
  // while it powers on, its console request and a health check are answered
  auto console = d.request("GET", base + "console", "");
  auto health = d.get("/v1/healthz");
  bool answered_first = !powered;
  // before the power-on completes.
  ::close(::open((sock_dir + "/go").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  power.join();
  REQUIRE(power_error == "");
  REQUIRE(answered_first);
  REQUIRE(console.status == 200);
  REQUIRE(console.body == "-- hwfarmd: the simulated board is still powering on --\n");
  REQUIRE(health.status == 200);
  REQUIRE(power_status == 200);
  REQUIRE(waitForText(dir.file("state/consoles/" + id + "/sim-0.log"), "HWFARM END status=0", 10s));
}

TEST_CASE("two slow flashes do not hold up a third board") {
  TempDir dir;
  // Given two boards whose flashers run until the test releases them, and a
  // third with a quick flasher and power switch,
  auto slow = [&](const std::string& board) {
    return R"(["/bin/sh", "-c", "touch )" + dir.file("flashing-" + board) + "; while [ ! -e " +
           dir.file("release") + R"( ]; do sleep 0.02; done"])";
  };
  const std::string quick = R"(["/bin/true"])";
  std::string config = qemuFleet(dir.file("state"), 0, kFirmwareRoot + "[leases]\nrecovery_s = 0\n") +
                       toolBoard(dir, "tool-1", slow("tool-1"), quick) +
                       toolBoard(dir, "tool-2", slow("tool-2"), quick) + toolBoard(dir, "tool-3", quick, quick);
  RunningDaemon d(dir, config);
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"tool"},"count":3,"context":"manual","wait_s":5})", 201);
  std::string base = "/v1/leases/" + std::string(lease.at("id").as_string()) + "/boards/";
  std::string image = R"({"image":")" + firmware("pass") + "\"}";
  std::atomic<int> slow_done{0};
  int status_1 = 0, status_2 = 0;
  // No Catch2 macros off the main thread: a failed request leaves status 0.
  auto flashSlow = [&](const std::string& board, int& status) {
    try {
      status = d.request("POST", base + board + "/flash", image, "", 60).status;
    } catch (const std::exception&) {
      status = -1;
    }
    ++slow_done;
  };
  std::thread flash_1(flashSlow, "tool-1", std::ref(status_1));
  std::thread flash_2(flashSlow, "tool-2", std::ref(status_2));
  bool both_started = waitFile(dir.file("flashing-tool-1")) && waitFile(dir.file("flashing-tool-2"));
  // while both flash, the third board is flashed and powered
  int flash_3 = d.request("POST", base + "tool-3/flash", image, "", 60).status;
  int power_3 = d.request("POST", base + "tool-3/power", R"({"action":"on"})", "", 60).status;
  // before either of them finishes.
  bool third_first = slow_done == 0;
  dir.write("release", "");
  flash_1.join();
  flash_2.join();
  REQUIRE(both_started);
  REQUIRE(flash_3 == 200);
  REQUIRE(power_3 == 200);
  REQUIRE(third_first);
  REQUIRE(status_1 == 200);
  REQUIRE(status_2 == 200);
}

TEST_CASE("a failing flasher answers with its failure class, exit status, output and the console's last lines") {
  TempDir dir;
  // Given a board whose console is a pty the test plays the board on, and
  // whose flasher waits for the test, then says why it fails and exits 3,
  int board = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  REQUIRE(board >= 0);
  REQUIRE(::grantpt(board) == 0);
  REQUIRE(::unlockpt(board) == 0);
  std::string tty = ::ptsname(board);
  std::string flasher = R"(["/bin/sh", "-c", "while [ ! -e )" + dir.file("release") +
                        R"( ]; do sleep 0.02; done; echo 'Error: target not halted' >&2; exit 3"])";
  std::string config = qemuFleet(dir.file("state"), 0, kFirmwareRoot + "[leases]\nrecovery_s = 0\n") +
                       toolBoard(dir, "tool-1", flasher, R"(["/bin/true"])", tty);
  RunningDaemon d(dir, config);
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"tool"},"context":"manual","wait_s":5})", 201);
  std::string id(lease.at("id").as_string());
  std::string console = dir.file("state/consoles/" + id + "/tool-1.log");
  hwfarm::cli::HttpResult result;
  std::string request_error;
  std::thread flash([&] { // no Catch2 macros off the main thread: the result is checked below
    try {
      result = d.request("POST", "/v1/leases/" + id + "/boards/tool-1/flash",
                         R"({"image":")" + firmware("pass") + "\"}", "", 60);
    } catch (const std::exception& e) {
      request_error = e.what();
    }
  });
  // while the flasher runs, the board prints on its console (captured from
  // the flash on),
  bool attached = waitForText(console, "console " + tty + " opened", 10s).has_value();
  // 25 lines, of which the evidence keeps the last 20,
  std::string printed, last_20;
  for (int i = 1; i <= 23; ++i) {
    std::string line = "boot attempt " + std::to_string(i) + ": retrying";
    printed += line + "\r\n";
    if (i > 5) last_20 += line + "\n";
  }
  printed += "boot: hard fault at 0x08000400\r\nwatchdog reset\r\n";
  last_20 += "boot: hard fault at 0x08000400\nwatchdog reset\n";
  bool written = ::write(board, printed.data(), printed.size()) == static_cast<ssize_t>(printed.size());
  bool captured = waitForText(console, "watchdog reset", 10s).has_value();
  dir.write("release", "");
  flash.join();
  ::close(board);
  REQUIRE(attached);
  REQUIRE(written);
  REQUIRE(captured);
  REQUIRE(request_error == "");
  // the flash fails as the lab's failure (502, as before), and the body
  // carries the failure class and the evidence: the flasher's exit status
  // and output, and the console's last lines; no signal ended it.
  INFO(result.body);
  REQUIRE(result.status == 502);
  json::object body = json::parse(result.body).as_object();
  REQUIRE(body.at("error").as_string() == "infrastructure_failure");
  REQUIRE(body.at("detail").as_string() ==
          "flashing board tool-1: exited with status 3; output: Error: target not halted\n");
  REQUIRE(body.at("failure_class").as_string() == "infrastructure");
  const json::object& evidence = body.at("evidence").as_object();
  REQUIRE(evidence.at("exit_code").as_int64() == 3);
  REQUIRE(evidence.at("tool_output").as_string() == "Error: target not halted\n");
  REQUIRE(evidence.at("console").as_string() == last_20);
  REQUIRE_FALSE(evidence.contains("signal"));
  REQUIRE(body.at("log").as_string() == dir.file("state/consoles/" + id + "/flash__tool-1.txt"));
}

TEST_CASE("a flasher orphaned by kill -9 does not keep hwfarmd's port") {
  TempDir dir;
  // A fixed port, so that the restarted daemon binds the same one.
  int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::string port = std::to_string(ntohs(addr.sin_port));
  ::close(probe);
  // Given a flash whose tool runs on (and records its pid), escaping
  // hwfarmd's reaper on purpose (no environment, so no marks, and a session
  // of its own): only then does a child outlive hwfarmd,
  std::string pidfile = dir.file("flasher.pid");
  std::string escape = dir.script("escape", "exec env -i setsid --wait /bin/sh -c 'echo $$ > " + pidfile +
                                                 "; exec sleep 60'\n");
  std::string flasher = R"([")" + escape + R"("])";
  std::string config = qemuFleet(dir.file("state"), 0, kFirmwareRoot + "[leases]\nrecovery_s = 0\n") +
                       toolBoard(dir, "tool-1", flasher, R"(["/bin/true"])");
  config.replace(config.find("127.0.0.1:0"), 11, "127.0.0.1:" + port);
  RunningDaemon d(dir, config);
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"tool"},"context":"manual","wait_s":5})", 201);
  std::string flash = "/v1/leases/" + std::string(lease.at("id").as_string()) + "/boards/tool-1/flash";
  std::thread request([&] {
    try {
      d.request("POST", flash, R"({"image":")" + firmware("pass") + "\"}", "", 30);
    } catch (const std::exception&) {
      // The daemon dies under it: no answer is expected.
    }
  });
  REQUIRE(waitForText(pidfile, "\n", 10s));
  pid_t orphan = std::stoi(readFile(pidfile));
  // when hwfarmd is killed during the flash and started again,
  std::string restart_error;
  try {
    d.killAndRestart();
  } catch (const std::exception& e) {
    restart_error = e.what(); // with the old daemon: "Address already in use"
  }
  request.join();
  bool orphan_ran = processAlive(orphan);
  ::kill(orphan, SIGKILL);
  // the new daemon listens on the same port (the orphan holds no socket of
  // the old one) and serves.
  REQUIRE(orphan_ran);
  REQUIRE(restart_error.empty());
  REQUIRE(d.get("/v1/healthz").status == 200);
}

TEST_CASE("a firmware that locks up in a semihosting call leaves the board reusable") {
  TempDir dir;
  RunningDaemon d(dir, qemuFleet(dir.file("state"), 1, kFirmwareRoot));
  // Given a firmware that ends with the old semihosting exit, which is now a
  // HardFault that locks the core up,
  auto first = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(first.at("id").as_string());
  std::string base = "/v1/leases/" + id + "/boards/sim-0/";
  post(d, base + "flash", R"({"image":")" + firmware("lockup") + "\"}", 200);
  post(d, base + "power", R"({"action":"on"})", 200);
  std::string log = dir.file("state/consoles/" + id + "/sim-0.log");
  REQUIRE(waitForText(log, "HWFARM BEGIN", 10s));
  // it never reports an end, and its simulator keeps running (a firmware
  // failure, for the run's deadline to catch), without reaching the host;
  REQUIRE(d.get("/v1/healthz").status == 200);
  REQUIRE(readFile(log).find("HWFARM END") == std::string::npos);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 1);
  // releasing the lease stops it,
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  waitWhile([&] { return qemuProcesses(dir.file("state/boards/sim-0/")) > 0; }, 3s);
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 0);
  // and the next lease runs its firmware on the same board.
  auto second = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":5})", 201);
  std::string id2(second.at("id").as_string());
  post(d, "/v1/leases/" + id2 + "/boards/sim-0/flash", R"({"image":")" + firmware("pass") + "\"}", 200);
  post(d, "/v1/leases/" + id2 + "/boards/sim-0/power", R"({"action":"on"})", 200);
  REQUIRE(waitForText(dir.file("state/consoles/" + id2 + "/sim-0.log"), "-- console closed: end of file --", 10s));
  REQUIRE(readFile(dir.file("state/consoles/" + id2 + "/sim-0.log")).find("] HWFARM END status=0\n") !=
          std::string::npos);
}

// No process outlives hwfarmd (docs/operations.md, "When hwfarmd dies"):
// hwfarmd killed with SIGKILL and SIGABRT in every phase of a simulator's
// life and of a flash leaves nothing of its own running.
namespace {

// sim-0, whose QEMU starts only once <its sock dir>/go exists, and tool-1,
// whose flasher runs on with two children of its own (one in a session of
// its own) and touches <dir>/flashing once they run.
std::string lifetimeFleet(const TempDir& dir) {
  std::string sock_dir = dir.file("state/boards/sim-0/sock");
  std::string qemu = dir.script("qemu-gate",
                            "touch " + sock_dir + "/started\nwhile [ ! -e " + sock_dir +
                                "/go ]; do sleep 0.02; done\nexec qemu-system-arm \"$@\"\n");
  std::string flasher = R"(["/bin/sh", "-c", "sleep 300 & setsid sleep 300 & touch )" + dir.file("flashing") +
                        R"(; exec sleep 300"])";
  return qemuFleet(dir.file("state"), 0, kFirmwareRoot + "[leases]\nrecovery_s = 0\n") +
         "  [[worker.board]]\n  name = \"sim-0\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n"
         "  qemu = { binary = \"" + qemu + "\" }\n" + toolBoard(dir, "tool-1", flasher, R"(["/bin/true"])");
}

// Requests the daemon may never answer (it dies under them), each on a
// thread of its own, joined at the end.
class Requests {
 public:
  explicit Requests(const RunningDaemon& d) : d_(d) {}
  ~Requests() {
    for (auto& t : threads_) t.join();
  }
  void post(const std::string& target, const std::string& body) {
    threads_.emplace_back([this, target, body] {
      try {
        d_.request("POST", target, body, "", 30);
      } catch (const std::exception&) {
        // The daemon died: no answer.
      }
    });
  }

 private:
  const RunningDaemon& d_;
  std::vector<std::thread> threads_;
};

enum class Phase { sim_starting, sim_waiting, sim_running, sim_ended, flashing };

// Brings a child of `d` to `phase`; returns the lease it used.
std::string reach(RunningDaemon& d, const TempDir& dir, Requests& requests, Phase phase) {
  std::string sock_dir = dir.file("state/boards/sim-0/sock");
  if (phase == Phase::flashing) {
    auto lease = post(d, "/v1/leases", R"({"selector":{"type":"tool"},"context":"manual"})", 201);
    std::string id(lease.at("id").as_string());
    requests.post("/v1/leases/" + id + "/boards/tool-1/flash", R"({"image":")" + firmware("pass") + "\"}");
    REQUIRE(waitFile(dir.file("flashing")));
    return id;
  }
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual"})", 201);
  std::string id(lease.at("id").as_string());
  std::string base = "/v1/leases/" + id + "/boards/sim-0/";
  post(d, base + "flash", R"({"image":")" + firmware(phase == Phase::sim_ended ? "idle" : "hang") + "\"}", 200);
  if (phase != Phase::sim_starting) {
    std::filesystem::create_directories(sock_dir);
    ::close(::open((sock_dir + "/go").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  }
  requests.post(base + "power", R"({"action":"on"})");
  std::string console = dir.file("state/consoles/" + id + "/sim-0.log");
  switch (phase) {
    case Phase::sim_starting: // its sandbox is up, QEMU not started yet
      REQUIRE(waitFile(sock_dir + "/started"));
      break;
    case Phase::sim_waiting: // QEMU made its socket; hwfarmd connects a moment later
      REQUIRE(waitFile(sock_dir + "/sim-0.uart", 10s));
      break;
    case Phase::sim_running:
      REQUIRE(waitForText(console, "HWFARM BEGIN", 10s));
      break;
    default: // after END: hwfarmd is stopping QEMU
      REQUIRE(waitForText(console, "HWFARM END", 10s));
      break;
  }
  return id;
}

// Kills hwfarmd with `sig` once a child of it reached `phase`; what is
// left of it (not even its reaper may be).
std::vector<std::string> killInPhase(Phase phase, int sig) {
  TempDir dir;
  RunningDaemon d(dir, lifetimeFleet(dir));
  Requests requests(d);
  reach(d, dir, requests, phase);
  // (after END, hwfarmd stops QEMU itself, racing the kill; the reaper's
  // own test holds a QEMU alive after END: tests/drivers_reaper_test.cpp)
  std::vector<std::string> children = processesUnder(dir.file("state"));
  INFO("children: " << children.size());
  if (phase != Phase::sim_ended) REQUIRE(!children.empty());
  d.process().signal(sig);
  auto ended = d.process().wait(10s);
  REQUIRE(ended);
  REQUIRE(ended->code == sig);
  return waitForNoProcessUnder(dir.path(), 15s);
}

std::string lines(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& l : list) out += l + "\n";
  return out;
}

// hwfarmd killed with SIGKILL, then with SIGABRT, in `phase`: nothing of it
// may be left.
void requireNothingLeft(Phase phase) {
  int sig = GENERATE(SIGKILL, SIGABRT);
  auto left = killInPhase(phase, sig);
  INFO("signal " << sig << "; still running:\n" << lines(left));
  REQUIRE(left.empty());
}

} // namespace

TEST_CASE("hwfarmd killed while its simulator starts leaves nothing running") {
  requireNothingLeft(Phase::sim_starting);
}

TEST_CASE("hwfarmd killed while its simulator waits for its console leaves nothing running") {
  requireNothingLeft(Phase::sim_waiting);
}

TEST_CASE("hwfarmd killed while its simulator runs firmware leaves nothing running") {
  requireNothingLeft(Phase::sim_running);
}

TEST_CASE("hwfarmd killed after its simulator's firmware ended leaves nothing running") {
  requireNothingLeft(Phase::sim_ended);
}

TEST_CASE("hwfarmd killed during a flash leaves no flasher running, nor its children") {
  requireNothingLeft(Phase::flashing);
}

TEST_CASE("a restarted hwfarmd stops the simulator and the flasher its predecessor left, naming them") {
  TempDir dir;
  RunningDaemon d(dir, lifetimeFleet(dir));
  std::vector<std::string> leases;
  {
    Requests requests(d);
    // Given a simulator running firmware and a flash in progress,
    leases.push_back(reach(d, dir, requests, Phase::sim_running));
    leases.push_back(reach(d, dir, requests, Phase::flashing));
    // (the flasher's `touch` ends by itself, maybe only now: not counted)
    auto lasting = [&dir] {
      std::vector<std::string> all = processesUnder(dir.file("state")), out;
      for (auto& p : all)
        if (p.find(" (touch): ") == std::string::npos) out.push_back(std::move(p));
      return out;
    };
    std::vector<std::string> before = lasting();
    // when hwfarmd and its reaper die together (an OOM killer, a `kill -9`
    // of both), their children run on,
    pid_t reaper = d.reaperPid();
    REQUIRE(reaper > 0);
    ::kill(reaper, SIGKILL);
    d.process().signal(SIGKILL);
    REQUIRE(d.process().wait(10s));
    waitWhile([&] { return processAlive(reaper); }, 1s);
    std::vector<std::string> orphans = lasting();
    INFO("before:\n" << lines(before) << "orphans:\n" << lines(orphans));
    // (each one that had become what it runs, by its pid: a child that had
    // not yet execed when `before` was read is named after its shell)
    std::vector<std::string> missing;
    for (const auto& p : before)
      if ((p.find(" (sleep): ") != std::string::npos || p.find(" (qemu-system-arm): ") != std::string::npos ||
           p.find(" (bwrap): ") != std::string::npos) &&
          std::none_of(orphans.begin(), orphans.end(),
                       [&](const std::string& o) { return o.compare(0, o.find(' ', 4), p, 0, p.find(' ', 4)) == 0; }))
        missing.push_back(p);
    INFO("ended with hwfarmd:\n" << lines(missing));
    REQUIRE(missing.empty());
    // and the flasher's three sleeps run on (one may exec a moment late).
    auto sleeps = [&lasting] {
      auto all = lasting();
      return std::count_if(all.begin(), all.end(),
                           [](const std::string& o) { return o.find(" (sleep): sleep 300") != std::string::npos; });
    };
    waitWhile([&] { return sleeps() < 3; }, 2s);
    REQUIRE(sleeps() == 3);
    REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 1);
  }
  // and hwfarmd started again on that state directory stops each of them
  // before it is ready, with a log line naming it,
  size_t log_start = d.log().size();
  REQUIRE_NOTHROW(d.killAndRestart());
  std::string log = d.log().substr(log_start);
  INFO(log);
  std::string state = dir.file("state");
  std::string earlier = "), left running by an earlier hwfarmd on " + state + ": ";
  size_t ready = log.find(" ready: ");
  size_t sim = log.find("stopped QEMU simulator sim-0 (pid ");
  size_t flasher = log.find("stopped flasher of board tool-1 (pid ");
  REQUIRE(sim < ready);
  REQUIRE(flasher < ready);
  REQUIRE(log.find("bwrap --new-session") != std::string::npos);
  REQUIRE(log.find(earlier + "sleep 300") != std::string::npos);
  // so that nothing but the new daemon and its reaper runs,
  std::vector<std::string> left = processesUnder(dir.file("state"));
  INFO("left:\n" << lines(left));
  REQUIRE(left.empty());
  REQUIRE(qemuProcesses(dir.file("state/boards/sim-0/")) == 0);
  // and the board runs the next lease's firmware.
  for (const auto& id : leases) REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  auto lease = post(d, "/v1/leases", R"({"selector":{"type":"mps2-an385"},"context":"manual","wait_s":10})", 201);
  std::string id(lease.at("id").as_string());
  std::string sock_dir = dir.file("state/boards/sim-0/sock");
  std::filesystem::create_directories(sock_dir);
  ::close(::open((sock_dir + "/go").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  post(d, "/v1/leases/" + id + "/boards/sim-0/flash", R"({"image":")" + firmware("pass") + "\"}", 200);
  post(d, "/v1/leases/" + id + "/boards/sim-0/power", R"({"action":"on"})", 200);
  REQUIRE(waitForText(dir.file("state/consoles/" + id + "/sim-0.log"), "HWFARM END status=0", 10s));
}
