// Flashers and power switches run as real processes: deadlines kill the
// whole process group, output is captured, missing tools are named.
#include <catch2/catch.hpp>

#include <thread>

#include "drivers/flasher.h"
#include "drivers/power.h"
#include "drivers/tool_runner.h"
#include "tests/support/process.h"

using namespace hwfarm::drivers;
using hwfarm::test::readFile;
using hwfarm::test::TempDir;
using namespace std::chrono_literals;

namespace {

bool alive(pid_t pid) { return hwfarm::test::processAlive(pid); }

hwfarm::config::FlashConfig preset(const std::string& driver, std::map<std::string, std::string> options) {
  hwfarm::config::FlashConfig c;
  c.driver = driver;
  c.options = std::move(options);
  return c;
}

} // namespace

TEST_CASE("a tool past its deadline is killed with every process it started") {
  TempDir dir;
  ToolOptions options;
  options.timeout = 300ms;
  options.kill_grace = 300ms;
  options.log_path = dir.file("flash.log");
  std::string pidfile = dir.file("grandchild.pid");
  // The "flasher" starts a grandchild that ignores SIGTERM, then hangs.
  auto r = runTool({"/bin/sh", "-c", "(trap '' TERM; exec sleep 60) & echo $! > " + pidfile + "; echo flashing; sleep 60"},
                   options);
  REQUIRE(r.started);
  REQUIRE(r.timed_out);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.describe() == "killed after its 0.3 s timeout");
  REQUIRE(r.output_tail == "flashing\n");
  pid_t grandchild = std::stoi(readFile(pidfile));
  std::this_thread::sleep_for(100ms);
  REQUIRE_FALSE(alive(grandchild));
}

TEST_CASE("a failing tool reports its status and the tail of its output") {
  TempDir dir;
  ToolOptions options;
  options.log_path = dir.file("flash.log");
  options.tail_bytes = 48; // the last two lines and a partial one, which is dropped
  auto r = runTool({"/bin/sh", "-c", "for i in 1 2 3 4 5 6; do echo line $i of noise; done; "
                                     "echo 'Error: no ST-LINK detected' >&2; exit 3"},
                   options);
  REQUIRE(r.started);
  REQUIRE(r.exit_code == 3);
  REQUIRE(r.describe() == "exited with status 3");
  REQUIRE(r.output_tail == "line 6 of noise\nError: no ST-LINK detected\n");
  REQUIRE(readFile(dir.file("flash.log")).find("line 1 of noise") == 0); // the whole log is kept
}

TEST_CASE("a missing tool is named in the error") {
  auto r = runTool({"hwfarm-no-such-flasher", "--version"}, {});
  REQUIRE_FALSE(r.started);
  REQUIRE(r.describe() == "tool \"hwfarm-no-such-flasher\" not found in PATH or not executable");
  auto abs = runTool({"/nonexistent/openocd"}, {});
  REQUIRE(abs.describe() == "tool \"/nonexistent/openocd\" not found or not executable");
}

TEST_CASE("flasher presets pass the board's USB serial to pick the right probe") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066DFF535155", "/dev/ttyACM3"};
  REQUIRE(flashArgv(preset("openocd", {{"interface", "interface/stlink.cfg"}, {"target", "target/stm32f4x.cfg"}}),
                    "fw.elf", t, dir.path()) ==
          std::vector<std::string>{"openocd", "-f", "interface/stlink.cfg", "-c", "adapter serial 066DFF535155", "-f",
                                   "target/stm32f4x.cfg", "-c", "program {fw.elf} verify reset exit"});
  REQUIRE(flashArgv(preset("pyocd", {{"target", "stm32f429zi"}}), "fw.elf", t, dir.path()) ==
          std::vector<std::string>{"pyocd", "flash", "--target", "stm32f429zi", "--uid", "066DFF535155", "fw.elf"});
  REQUIRE(flashArgv(preset("st-flash", {{"address", "0x08000000"}}), "fw.bin", t, dir.path()) ==
          std::vector<std::string>{"st-flash", "--serial", "066DFF535155", "--reset", "write", "fw.bin", "0x08000000"});
  REQUIRE(flashArgv(preset("dfu-util", {{"alt", "0"}, {"address", "0x08000000"}}), "fw.bin", t, dir.path()) ==
          std::vector<std::string>{"dfu-util", "--alt", "0", "--serial", "066DFF535155", "--dfuse-address",
                                   "0x08000000:leave", "--download", "fw.bin"});
  REQUIRE(flashArgv(preset("esptool", {{"chip", "esp32"}, {"baud", "460800"}, {"address", "0x0"}}), "fw.bin", t,
                    dir.path()) ==
          std::vector<std::string>{"esptool", "--chip", "esp32", "--port", "/dev/ttyACM3", "--baud", "460800",
                                   "write_flash", "0x0", "fw.bin"});
  REQUIRE(flashArgv(preset("nrfjprog", {{"family", "NRF52"}}), "fw.hex", t, dir.path()) ==
          std::vector<std::string>{"nrfjprog", "--family", "NRF52", "--snr", "066DFF535155", "--program", "fw.hex",
                                   "--sectorerase", "--verify", "--reset"});
  auto jlink = flashArgv(preset("jlink", {{"device", "STM32F429ZI"}, {"interface", "SWD"}, {"speed_khz", "4000"},
                                          {"address", "0x08000000"}}),
                         "fw.bin", t, dir.path());
  REQUIRE(jlink == std::vector<std::string>{"JLinkExe", "-USB", "066DFF535155", "-device", "STM32F429ZI", "-if", "SWD",
                                            "-speed", "4000", "-autoconnect", "1", "-ExitOnError", "1",
                                            "-CommandFile", dir.file("jlink-nucleo-1.jlink")});
  REQUIRE(readFile(dir.file("jlink-nucleo-1.jlink")) == "loadfile fw.bin 0x08000000\nr\ng\nexit\n");
  auto with_tool = preset("pyocd", {{"target", "x"}});
  with_tool.tool = "/opt/pyocd/bin/pyocd";
  with_tool.extra_args = {"--connect", "under-reset", "--board-id={usb_serial}"};
  auto argv = flashArgv(with_tool, "fw.elf", t, dir.path());
  REQUIRE(argv.front() == "/opt/pyocd/bin/pyocd");
  REQUIRE(argv.back() == "--board-id=066DFF535155");
}

TEST_CASE("a command flasher substitutes its placeholders and runs without a shell") {
  TempDir dir;
  hwfarm::config::FlashConfig c;
  c.driver = "command";
  c.argv = {"/bin/echo", "{board}", "sn={usb_serial}", "{image}", "on {serial_port}", "$HOME;true"};
  c.timeout_s = 5;
  auto r = flash(c, "/tmp/fw image.elf", {"b1", "066D", "/dev/ttyACM0"}, dir.file("log"), dir.path());
  REQUIRE(r.ok());
  // No shell: "$HOME;true" reaches the tool verbatim, the space stays in one argument.
  REQUIRE(readFile(dir.file("log")) == "b1 sn=066D /tmp/fw image.elf on /dev/ttyACM0 $HOME;true\n");
}

TEST_CASE("power switches: uhubctl ports, operator commands and none") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066D", "/dev/ttyACM3"};
  hwfarm::config::PowerConfig hub;
  hub.driver = "uhubctl";
  hub.hub = "1-1.4";
  hub.port = 2;
  hub.off_s = 1.5;
  REQUIRE(powerArgv(hub, PowerAction::cycle, t) ==
          std::vector<std::vector<std::string>>{{"uhubctl", "--location", "1-1.4", "--ports", "2", "--action", "cycle",
                                                 "--delay", "1.5"}});
  REQUIRE(powerArgv(hub, PowerAction::off, t).at(0).at(6) == "off");

  hwfarm::config::PowerConfig relay;
  relay.driver = "command";
  relay.on = {"/bin/sh", "-c", "echo on {board} >> " + dir.file("relay.log")};
  relay.off = {"/bin/sh", "-c", "echo off {board} >> " + dir.file("relay.log")};
  relay.off_s = 0.05;
  // A cycle without its own command is off, a pause, then on.
  REQUIRE(power(relay, PowerAction::cycle, t, dir.file("power.log")).ok);
  REQUIRE(readFile(dir.file("relay.log")) == "off nucleo-1\non nucleo-1\n");

  relay.on = {"/bin/sh", "-c", "echo relay board not answering; exit 4"};
  Status failed = power(relay, PowerAction::on, t, dir.file("power.log"));
  REQUIRE_FALSE(failed.ok);
  REQUIRE(failed.message == "power on of board nucleo-1: /bin/sh exited with status 4; output: relay board not answering\n");

  hwfarm::config::PowerConfig none;
  REQUIRE(powerArgv(none, PowerAction::cycle, t).empty());
  REQUIRE(power(none, PowerAction::cycle, t, "").ok);
}
