// Fleet config validation: every error names file:line:column, the key path,
// what was expected and what was found; all errors of a file are reported.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "config/credentials.h"
#include "config/driver_specs.h"
#include "config/echo.h"
#include "config/loader.h"
#include "config/tokens.h"
#include "tests/support/process.h"

using hwfarm::config::LoadResult;
using hwfarm::config::parseFleetConfig;
using hwfarm::config::ListenAddress;

namespace {

std::vector<std::string> errorsOf(const std::string& toml) {
  LoadResult result = parseFleetConfig(toml, "fleet.toml");
  std::vector<std::string> out;
  for (const auto& e : result.errors) out.push_back(e.format());
  REQUIRE(result.config.has_value() == out.empty());
  return out;
}

// One valid agent section (lines 1-3) that the cases below build on.
const std::string kAgent =
    "[agent]\n"
    "name = \"lab\"\n"
    "tier = 2\n";

// A valid usb board named `name` on its own [[worker.board]] table.
std::string usbBoard(const std::string& name, const std::string& serial) {
  return "  [[worker.board]]\n"
         "  name = \"" + name + "\"\n"
         "  type = \"nucleo\"\n"
         "  usb = { vendor = \"0483\", product = \"374b\", serial = \"" + serial + "\" }\n";
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("the reference config and the simulated fleet load cleanly") {
  for (const char* name : {"reference.toml", "sim-fleet.toml"}) {
    std::string path = std::string(HWFARM_SOURCE_DIR) + "/config/examples/" + name;
    LoadResult result = hwfarm::config::loadFleetConfigFile(path);
    INFO(path);
    for (const auto& e : result.errors) INFO(e.format());
    REQUIRE(result.ok());
    REQUIRE(result.config->boardCount() >= 3);
  }
}

TEST_CASE("the embedded default is sim-fleet.toml with 2 workers of 2 QEMU boards and one shared type") {
  std::string path = std::string(HWFARM_SOURCE_DIR) + "/config/examples/sim-fleet.toml";
  REQUIRE(std::string(hwfarm::config::embeddedSimFleet()) == readFile(path));
  LoadResult result = parseFleetConfig(hwfarm::config::embeddedSimFleet(), "sim");
  REQUIRE(result.ok());
  const auto& c = *result.config;
  REQUIRE(c.workers.size() == 2);
  std::map<std::string, int> types;
  for (const auto& w : c.workers) {
    REQUIRE(w.boards.size() == 2);
    for (const auto& b : w.boards) {
      REQUIRE(b.driver == "qemu");
      ++types[b.type];
    }
  }
  REQUIRE(types["mps2-an385"] == 2);
  REQUIRE(c.agent.anonymous_loopback);
  REQUIRE(c.agent.state_dir == ".hwfarm-state");
  for (const auto& l : c.agent.listen) REQUIRE(l.isLoopback());
}

TEST_CASE("values are read into the config with defaults filled in") {
  LoadResult r = parseFleetConfig(kAgent +
                                      "[[worker]]\n"
                                      "name = \"w0\"\n" +
                                      usbBoard("b0", "S0") +
                                      "  flash = { driver = \"st-flash\" }\n"
                                      "  power = { driver = \"uhubctl\", hub = \"1-1\", port = 3 }\n",
                                  "f.toml");
  REQUIRE(r.ok());
  const auto& c = *r.config;
  REQUIRE(c.agent.listen.size() == 1);
  REQUIRE(c.agent.listen[0].host == "127.0.0.1");
  REQUIRE(c.agent.listen[0].port == 7420);
  REQUIRE(c.agent.state_dir == "/var/lib/hwfarm");
  REQUIRE(c.limits.max_body_bytes == 65536);
  const auto& w = c.workers.at(0);
  REQUIRE(w.node == "w0"); // the node defaults to the worker's name
  const auto& b = w.boards.at(0);
  REQUIRE(*b.usb.vendor == 0x0483);
  REQUIRE(*b.usb.product == 0x374b);
  REQUIRE(*b.usb.serial == "S0");
  REQUIRE(b.serial.port == "auto");
  REQUIRE(b.serial.baud == 115200);
  REQUIRE(b.flash.driver == "st-flash");
  REQUIRE(b.flash.options.at("address") == "0x08000000");
  REQUIRE(b.power.port == 3);
  REQUIRE(c.sla.tiers[0].resolution_window_h == 24);
  REQUIRE(c.sla.tiers[1].resolution_window_h == 72);
}

TEST_CASE("a TOML syntax error names its position") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = \n");
  REQUIRE(errors.size() == 1);
  REQUIRE_THAT(errors[0], Catch::StartsWith("fleet.toml:3:8: TOML syntax error: "));
}

TEST_CASE("a usb.vendor of five hex digits is refused at its line and column") {
  auto errors = errorsOf(kAgent +
                         "[[worker]]\n"
                         "name = \"w1\"\n"
                         "  [[worker.board]]\n"
                         "  name = \"stm32-3\"\n"
                         "  type = \"nucleo\"\n"
                         "  [worker.board.usb]\n"
                         "  vendor = \"1ffff\"\n"
                         "  product = \"374b\"\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:10:12: worker \"w1\" board \"stm32-3\": usb.vendor: expected a "
                        "16-bit hex id like \"0483\", got \"1ffff\""});
}

TEST_CASE("unknown keys are errors with a did-you-mean suggestion") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = 1\nlog_levle = \"debug\"\nfrobnicate = 1\n"
                         "[[worker]]\nname = \"w\"\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:4:1: agent.log_levle: unknown key (did you mean \"log_level\"?)",
                        "fleet.toml:5:1: agent.frobnicate: unknown key"});
}

TEST_CASE("a typo in a top-level table name is an unknown key") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n[limit]\nmax_queue = 5\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:6:2: limit: unknown key (did you mean \"limits\"?)"});
}

TEST_CASE("wrong types and out-of-range values say what was expected and found") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = \"1\"\nshutdown_timeout_s = -3\n"
                         "[limits]\nmax_body_bytes = 10\n"
                         "[[worker]]\nname = \"w\"\n" +
                         usbBoard("b", "S") + "  serial = { baud = 0 }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:3:8: agent.tier: expected an integer from 1 to 3, got \"1\"",
                        "fleet.toml:4:22: agent.shutdown_timeout_s: expected a number above 0 and up "
                        "to 300, got -3",
                        "fleet.toml:6:18: limits.max_body_bytes: expected an integer from 1024 to "
                        "67108864, got 10",
                        "fleet.toml:13:21: worker \"w\" board \"b\": serial.baud: expected an integer from "
                        "50 to 4000000, got 0"});
}

TEST_CASE("a baud rate termios cannot set is rejected with the rates it can") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("b", "S") + "  serial = { baud = 250000 }\n");
  REQUIRE(errors.size() == 1);
  REQUIRE(errors[0].find("serial.baud: expected a standard rate (50 75 110 ") != std::string::npos);
  REQUIRE(errors[0].find(" 115200 230400 460800 ") != std::string::npos);
  REQUIRE(errors[0].find(" 3500000 4000000), got 250000") != std::string::npos);
  REQUIRE(errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("b", "S") + "  serial = { baud = 921600 }\n")
              .empty());
}

TEST_CASE("a tier outside 1-3 is rejected") {
  for (const char* tier : {"0", "4"}) {
    auto errors = errorsOf(std::string("[agent]\nname = \"lab\"\ntier = ") + tier + "\n[[worker]]\nname = \"w\"\n");
    REQUIRE(errors == std::vector<std::string>{"fleet.toml:3:8: agent.tier: expected an integer from 1 to 3, got " +
                                               std::string(tier)});
  }
}

TEST_CASE("missing required keys are reported at their table") {
  auto errors = errorsOf("[agent]\nlog_level = \"info\"\n"
                         "[[worker]]\n"
                         "name = \"w\"\n"
                         "  [[worker.board]]\n"
                         "  name = \"b\"\n"
                         "  [[worker.board]]\n"
                         "  name = \"c\"\n"
                         "  type = \"t\"\n"
                         "  usb = { vendor = \"0483\" }\n"
                         "  flash = { driver = \"openocd\" }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:1:1: agent.name: required key is missing",
                        "fleet.toml:1:1: agent.tier: required key is missing",
                        "fleet.toml:5:3: worker \"w\" board \"b\": type: required key is missing",
                        "fleet.toml:5:3: worker \"w\" board \"b\": usb: required key is missing",
                        "fleet.toml:10:9: worker \"w\" board \"c\": usb.product: required key is missing",
                        "fleet.toml:11:11: worker \"w\" board \"c\": flash.target: required key is missing"});
}

TEST_CASE("a file without agent or worker tables names both") {
  auto errors = errorsOf("# empty\n");
  REQUIRE(errors.size() == 2);
  REQUIRE(errors[0] == "fleet.toml:1:1: agent: required key is missing");
  REQUIRE(errors[1] == "fleet.toml:1:1: worker: at least one [[worker]] table is required");
}

TEST_CASE("duplicate worker and node and board names point at the first definition") {
  auto errors = errorsOf(kAgent +
                         "[[worker]]\n"
                         "name = \"w1\"\n" +
                         usbBoard("b1", "S1") +
                         "[[worker]]\n"
                         "name = \"w1\"\n"
                         "[[worker]]\n"
                         "name = \"w3\"\n"
                         "node = \"w1\"\n" +
                         usbBoard("b1", "S2"));
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:11:8: worker \"w1\": name: worker name \"w1\" is already used (first "
                        "defined at fleet.toml:5:8)",
                        "fleet.toml:11:8: worker \"w1\": name: Jenkins node \"w1\" is already used (first "
                        "defined at fleet.toml:5:8)",
                        "fleet.toml:14:8: worker \"w3\": node: Jenkins node \"w1\" is already used (first "
                        "defined at fleet.toml:5:8)",
                        "fleet.toml:16:10: worker \"w3\" board \"b1\": name: board name \"b1\" is already "
                        "used (first defined at fleet.toml:7:10)"});
}

TEST_CASE("one USB serial or serial port on two boards is an error") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "066D") +
                         "  serial = { port = \"/dev/ttyACM0\" }\n" + usbBoard("b", "066D") +
                         "  serial = { port = \"/dev/ttyACM0\" }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:14:55: worker \"w\" board \"b\": usb.serial: USB serial \"066D\" is "
                        "already used by board \"a\" (first defined at fleet.toml:9:55)",
                        "fleet.toml:15:21: worker \"w\" board \"b\": serial.port: serial port "
                        "\"/dev/ttyACM0\" is already used by board \"a\" (first defined at "
                        "fleet.toml:10:21)"});
}

TEST_CASE("unknown driver names list the known ones") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S") +
                         "  flash = { driver = \"opencd\", target = \"x\" }\n"
                         "  power = { driver = \"relay\" }\n"
                         "  [[worker.board]]\n  name = \"q\"\n  type = \"t\"\n  driver = \"qemu-arm\"\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:10:22: worker \"w\" board \"a\": flash.driver: unknown driver "
                        "\"opencd\" (did you mean \"openocd\"?); known drivers: command, dfu-util, "
                        "esptool, jlink, nrfjprog, openocd, pyocd, st-flash",
                        "fleet.toml:11:22: worker \"w\" board \"a\": power.driver: unknown driver "
                        "\"relay\"; known drivers: command, none, uhubctl",
                        "fleet.toml:15:12: worker \"w\" board \"q\": driver: unknown driver \"qemu-arm\" "
                        "(did you mean \"qemu\"?); known drivers: qemu, usb"});
}

TEST_CASE("flash options belong to their driver") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S") +
                         "  flash = { driver = \"pyocd\", targt = \"x\", target = \"y\", alt = 1, argv = [\"x\"] }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:10:31: worker \"w\" board \"a\": flash.targt: unknown key (did you "
                        "mean \"target\"?)",
                        "fleet.toml:10:58: worker \"w\" board \"a\": flash.alt: unknown key (not an "
                        "option of flash driver \"pyocd\"; its options: frequency_hz, target; common "
                        "keys: extra_args, timeout_s, tool)",
                        "fleet.toml:10:67: worker \"w\" board \"a\": flash.argv: unknown key (only used by "
                        "flash driver \"command\")"});
}

TEST_CASE("command templates accept only known placeholders") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S") +
                         "  flash = { driver = \"command\", argv = [\"flash\", \"{image}\", \"--sn={serial}\", \"{board\"] }\n"
                         "  power = { driver = \"command\", on = [\"relay\", \"{image}\"], off = [] }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:10:61: worker \"w\" board \"a\": flash.argv[2]: unknown placeholder "
                        "{serial} (known: {image}, {usb_serial}, {serial_port}, {board})",
                        "fleet.toml:10:78: worker \"w\" board \"a\": flash.argv[3]: unbalanced \"{\" in "
                        "\"{board\"",
                        "fleet.toml:11:48: worker \"w\" board \"a\": power.on[1]: unknown placeholder "
                        "{image} (known: {usb_serial}, {serial_port}, {board})",
                        "fleet.toml:11:66: worker \"w\" board \"a\": power.off: expected a non-empty argv "
                        "array whose first element is the program"});
}

TEST_CASE("a valid command template is expanded") {
  LoadResult r = parseFleetConfig(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S") +
                                      "  flash = { driver = \"command\", argv = [\"tool\", \"--sn={usb_serial}\", \"{image}\"] }\n",
                                  "f.toml");
  REQUIRE(r.ok());
  const auto& argv = r.config->workers[0].boards[0].flash.argv;
  REQUIRE(hwfarm::config::expandTemplate(argv[1], {{"usb_serial", "066D"}, {"image", "a.elf"}}) == "--sn=066D");
}

TEST_CASE("a qemu board rejects hardware keys and a usb board the qemu key") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S") +
                         "  qemu = { machine = \"mps2-an385\" }\n"
                         "  [[worker.board]]\n  name = \"q\"\n  type = \"t\"\n  driver = \"qemu\"\n"
                         "  usb = { vendor = \"0483\", product = \"374b\" }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:10:3: worker \"w\" board \"a\": qemu: unknown key (only used by driver "
                        "\"qemu\")",
                        "fleet.toml:15:3: worker \"w\" board \"q\": usb: unknown key (not used by driver "
                        "\"qemu\": the simulator provides the console, flashing and power)"});
}

TEST_CASE("listen addresses are checked and anonymous access needs loopback") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = 1\nanonymous = \"loopback\"\n"
                         "listen = [\"0.0.0.0:7420\", \"lab:80\", \"127.0.0.1:99999\", \"unix:\"]\n"
                         "[[worker]]\nname = \"w\"\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:5:10: agent.listen: anonymous = \"loopback\" requires loopback listen "
                        "addresses, got \"0.0.0.0:7420\"",
                        "fleet.toml:5:27: agent.listen: expected \"HOST:PORT\", \"[IPV6]:PORT\", \"https://HOST:PORT\" or "
                        "\"unix:/PATH\", got \"lab:80\" (not an IPv4 address or localhost)",
                        "fleet.toml:5:37: agent.listen: expected \"HOST:PORT\", \"[IPV6]:PORT\", \"https://HOST:PORT\" or "
                        "\"unix:/PATH\", got \"127.0.0.1:99999\" (port must be 0 to 65535)",
                        "fleet.toml:5:56: agent.listen: expected \"HOST:PORT\", \"[IPV6]:PORT\", \"https://HOST:PORT\" or "
                        "\"unix:/PATH\", got \"unix:\" (empty socket path)"});
}

TEST_CASE("https listen addresses parse with their certificate and key, http:// ones as plain TCP") {
  LoadResult r = parseFleetConfig("[agent]\nname = \"lab\"\ntier = 1\n"
                                  "listen = [\"https://0.0.0.0:7443\", \"http://127.0.0.1:7420\", \"https://[::]:0\"]\n"
                                  "tls_cert = \"/etc/hwfarm/tls/a.crt\"\ntls_key = \"/etc/hwfarm/tls/a.key\"\n"
                                  "[[worker]]\nname = \"w\"\n",
                                  "fleet.toml");
  INFO((r.errors.empty() ? "" : r.errors[0].format()));
  REQUIRE(r.ok());
  const auto& listen = r.config->agent.listen;
  REQUIRE(listen.size() == 3);
  CHECK((listen[0].kind == ListenAddress::Kind::tls && listen[0].host == "0.0.0.0" && listen[0].port == 7443));
  CHECK((listen[1].kind == ListenAddress::Kind::tcp && listen[1].host == "127.0.0.1" && listen[1].port == 7420));
  CHECK((listen[2].kind == ListenAddress::Kind::tls && listen[2].host == "::" && listen[2].port == 0));
  CHECK(r.config->agent.tls_cert == "/etc/hwfarm/tls/a.crt");
  CHECK(r.config->agent.tls_key == "/etc/hwfarm/tls/a.key");
}

TEST_CASE("IPv6 and unix listen addresses parse") {
  LoadResult r = parseFleetConfig("[agent]\nname = \"lab\"\ntier = 1\nlisten = [\"[::1]:0\", \"unix:/run/h.sock\"]\n"
                                  "[[worker]]\nname = \"w\"\n",
                                  "f.toml");
  REQUIRE(r.ok());
  REQUIRE(r.config->agent.listen[0].host == "::1");
  REQUIRE(r.config->agent.listen[0].isLoopback());
  REQUIRE(r.config->agent.listen[1].path == "/run/h.sock");
}

TEST_CASE("sla pin_tier cannot be above the registered tier and ratios must be above 0 and at most 1") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n[sla]\npin_tier = 1\n[sla.tier2]\nfailure_ratio_max = 1.5\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:7:12: sla.pin_tier: cannot pin tier 1, above the registered tier 2 "
                        "(agent.tier)",
                        "fleet.toml:9:21: sla.tier2.failure_ratio_max: expected a number above 0 and up to "
                        "1, got 1.5"});
}

TEST_CASE("health banners must be valid regular expressions") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S") +
                         "  health = { banner = \"OK(\" }\n");
  REQUIRE(errors.size() == 1);
  REQUIRE_THAT(errors[0], Catch::StartsWith("fleet.toml:10:23: worker \"w\" board \"a\": health.banner: "
                                            "expected a regular expression, got \"OK(\" ("));
}

TEST_CASE("bad names and labels") {
  auto errors = errorsOf(kAgent + "[[worker]]\nname = \"w 1\"\n  [[worker.board]]\n  name = \"b\"\n"
                         "  type = \"t\"\n  driver = \"qemu\"\n  labels = [\"ok\", \"not ok\", 3]\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:5:8: worker #1: name: expected a name of letters, digits, \".\", \"_\" "
                        "or \"-\" that starts with a letter or digit (at most 64 characters), got \"w 1\"",
                        "fleet.toml:10:19: worker #1 board \"b\": labels[1]: expected a name of letters, "
                        "digits, \".\", \"_\" or \"-\" that starts with a letter or digit (at most 64 "
                        "characters), got \"not ok\"",
                        "fleet.toml:10:29: worker #1 board \"b\": labels[2]: expected a string, got 3"});
}

TEST_CASE("all errors of a file are reported and not just the first") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = 9\nlog_level = \"loud\"\n"
                         "[[worker]]\nname = \"w\"\n" +
                         usbBoard("a", "S") + "  serial = { port = \"ttyACM0\" }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:3:8: agent.tier: expected an integer from 1 to 3, got 9",
                        "fleet.toml:4:13: agent.log_level: expected one of trace, debug, info, warn, "
                        "error, got \"loud\"",
                        "fleet.toml:11:21: worker \"w\" board \"a\": serial.port: expected \"auto\" or an "
                        "absolute device path, got \"ttyACM0\""});
}

TEST_CASE("an unreadable file is one error naming the file and the reason") {
  auto missing = hwfarm::config::loadFleetConfigFile("/nonexistent/fleet.toml");
  REQUIRE(missing.errors.size() == 1);
  REQUIRE(missing.errors[0].format() == "/nonexistent/fleet.toml: cannot read file: No such file or directory");
  auto directory = hwfarm::config::loadFleetConfigFile("/tmp");
  REQUIRE(directory.errors.size() == 1);
  REQUIRE(directory.errors[0].format() == "/tmp: cannot read file: Is a directory");
}

TEST_CASE("edge cases of floats for integers and relative sockets and command-only argv and empty paths") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = 2\nlisten = \"unix:run/h.sock\"\n"
                         "[limits]\nmax_queue = 2048.0\n"
                         "[[worker]]\nname = \"w\"\n" +
                         usbBoard("a", "S") +
                         "  flash = { driver = \"command\", argv = [\"x\"], tool = \"y\" }\n"
                         "  power = { hub = \"1-1\" }\n" +
                         usbBoard("b", "T") +
                         "  flash = { driver = \"st-flash\", extra_args = [\"--sn={serial}\"] }\n"
                         "  health = { image = \"\" }\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:4:10: agent.listen: expected \"HOST:PORT\", \"[IPV6]:PORT\", \"https://HOST:PORT\" or "
                        "\"unix:/PATH\", got \"unix:run/h.sock\" (the socket path must be absolute)",
                        "fleet.toml:6:13: limits.max_queue: expected an integer from 1 to 10000000, got 2048.0",
                        "fleet.toml:13:47: worker \"w\" board \"a\": flash.tool: unknown key (not used by "
                        "flash driver \"command\": argv names the program and all its arguments)",
                        "fleet.toml:14:11: worker \"w\" board \"a\": power.driver: required key is missing",
                        "fleet.toml:19:48: worker \"w\" board \"b\": flash.extra_args[0]: unknown placeholder "
                        "{serial} (known: {image}, {usb_serial}, {serial_port}, {board})",
                        "fleet.toml:20:22: worker \"w\" board \"b\": health.image: expected the path of a "
                        "health-check image, got \"\""});
}

TEST_CASE("pin_tier is judged only against a valid agent.tier") {
  auto errors = errorsOf("[agent]\nname = \"lab\"\ntier = 9\n[[worker]]\nname = \"w\"\n[sla]\npin_tier = 1\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:3:8: agent.tier: expected an integer from 1 to 3, got 9"});
}

TEST_CASE("the example tokens file parses and token errors name their position") {
  std::string path = std::string(HWFARM_SOURCE_DIR) + "/config/examples/tokens.toml";
  std::string text = readFile(path);
  auto example = hwfarm::config::parseTokens(text, path);
  REQUIRE(example.ok());
  REQUIRE(example.tokens.size() == 2);
  REQUIRE(example.tokens[0].sha256 == hwfarm::config::sha256Hex("example-token-change-me"));
  REQUIRE(example.tokens[0].role == hwfarm::config::Role::pipeline);

  auto bad = hwfarm::config::parseTokens("[[token]]\nname = \"a\"\nrole = \"admin\"\nsha256 = \"12\"\n"
                                         "[[token]]\nname = \"a\"\nrole = \"viewer\"\nsha256 = \"" +
                                             std::string(64, 'A') + "\"\nexpires = 1\n",
                                         "tokens.toml");
  std::vector<std::string> errors;
  for (const auto& e : bad.errors) errors.push_back(e.format());
  REQUIRE(errors == std::vector<std::string>{
                        "tokens.toml:3:8: token #1: role: expected \"viewer\", \"pipeline\" or \"operator\", got \"admin\"",
                        "tokens.toml:4:10: token #1: sha256: expected the 64 hex digits of the token's SHA-256 "
                        "(hwfarmctl token new prints it)",
                        "tokens.toml:6:8: token #2: name: token name \"a\" is already used (first defined at "
                        "tokens.toml:2:8)",
                        "tokens.toml:9:1: token #2: expires: unknown key"});
  REQUIRE(bad.tokens.empty());
  auto reserved = hwfarm::config::parseTokens("[[token]]\nname = \"anonymous\"\nrole = \"viewer\"\nsha256 = \"" +
                                                  std::string(64, 'a') + "\"\n",
                                              "tokens.toml");
  REQUIRE(reserved.errors.at(0).format() ==
          "tokens.toml:2:8: token #1: name: \"anonymous\" is reserved for anonymous loopback access");
}

TEST_CASE("leases settings are bounded and the default TTL fits limits.max_ttl_s") {
  auto errors = errorsOf(kAgent + "[limits]\nmax_ttl_s = 600\n[leases]\ndefault_ttl_s = 1800\nrecovery_s = -1\n"
                                  "fsync = \"yes\"\nmax_swaps_per_hour = 1.5\n[[worker]]\nname = \"w\"\n");
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:7:17: leases.default_ttl_s: must not exceed limits.max_ttl_s (600)",
                        "fleet.toml:8:14: leases.recovery_s: expected a number from 0 to 3600, got -1",
                        "fleet.toml:9:9: leases.fsync: expected true or false, got \"yes\"",
                        "fleet.toml:10:22: leases.max_swaps_per_hour: expected an integer from 0 to 1000, got 1.5"});
  // A lease's swaps per hour: 3 unless set, 0 turns swaps off, past 1000 is refused.
  REQUIRE(parseFleetConfig(kAgent + "[[worker]]\nname = \"w\"\n", "fleet.toml").config->leases.max_swaps_per_hour == 3);
  REQUIRE(parseFleetConfig(kAgent + "[leases]\nmax_swaps_per_hour = 0\n[[worker]]\nname = \"w\"\n", "fleet.toml")
              .config->leases.max_swaps_per_hour == 0);
  REQUIRE(errorsOf(kAgent + "[leases]\nmax_swaps_per_hour = 1001\n[[worker]]\nname = \"w\"\n") ==
          std::vector<std::string>{"fleet.toml:5:22: leases.max_swaps_per_hour: expected an integer from 0 to 1000, got 1001"});
}

TEST_CASE("runs: a lease's share of the simulators and the longest deadline fit the lab's limits") {
  const std::string worker = "[[worker]]\nname = \"w\"\n";
  // Defaults: one simulator of two stays for another lease; an hour per image.
  LoadResult plain = parseFleetConfig(kAgent + worker, "fleet.toml");
  REQUIRE(plain.ok());
  CHECK(plain.config->runs.max_simulators_per_lease == 1);
  CHECK(plain.config->runs.max_deadline_s == 3600);
  CHECK(plain.config->runs.max_simulator_s == 7200);
  LoadResult four = parseFleetConfig(kAgent + "[runs]\nmax_simulators = 4\nmax_deadline_s = 30\n" + worker, "fleet.toml");
  REQUIRE(four.ok());
  CHECK(four.config->runs.max_simulators_per_lease == 3);
  CHECK(four.config->runs.default_deadline_s == 30); // the default follows a lower limit
  LoadResult one = parseFleetConfig(kAgent + "[runs]\nmax_simulators = 1\nmax_simulator_s = 0.5\n" + worker, "fleet.toml");
  REQUIRE(one.ok());
  CHECK(one.config->runs.max_simulators_per_lease == 1);
  CHECK(one.config->runs.max_simulator_s == 0.5);
  REQUIRE(errorsOf(kAgent + "[runs]\nmax_simulator_s = 0\n" + worker) ==
          std::vector<std::string>{"fleet.toml:5:19: runs.max_simulator_s: expected a number above 0 and up to 604800, got 0"});
  auto errors = errorsOf(kAgent + "[runs]\nmax_simulators = 2\nmax_simulators_per_lease = 3\nmax_deadline_s = 60\n"
                                  "default_deadline_s = 120\n" + worker);
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:6:28: runs.max_simulators_per_lease: must not exceed runs.max_simulators (2)",
                        "fleet.toml:8:22: runs.default_deadline_s: must not exceed runs.max_deadline_s (60)"});
}

TEST_CASE("runs: a run's and a lease's artifact quotas, the run's within the lease's") {
  const std::string worker = "[[worker]]\nname = \"w\"\n";
  // Defaults: 1 GiB a run, 4 GiB a lease.
  LoadResult plain = parseFleetConfig(kAgent + worker, "fleet.toml");
  REQUIRE(plain.ok());
  CHECK(plain.config->runs.max_artifact_bytes == int64_t{1} << 30);
  CHECK(plain.config->runs.max_lease_artifact_bytes == int64_t{4} << 30);
  // A run's quota set alone above the lease's default raises it.
  LoadResult big = parseFleetConfig(kAgent + "[runs]\nmax_artifact_bytes = 8589934592\n" + worker, "fleet.toml");
  REQUIRE(big.ok());
  CHECK(big.config->runs.max_lease_artifact_bytes == int64_t{8} << 30);
  // Both set, the run's above the lease's; and a quota under 1 MiB.
  REQUIRE(errorsOf(kAgent + "[runs]\nmax_artifact_bytes = 2097152\nmax_lease_artifact_bytes = 1048576\n" + worker) ==
          std::vector<std::string>{
              "fleet.toml:5:22: runs.max_artifact_bytes: must not exceed runs.max_lease_artifact_bytes (1048576)"});
  REQUIRE(errorsOf(kAgent + "[runs]\nmax_artifact_bytes = 4096\n" + worker) ==
          std::vector<std::string>{
              "fleet.toml:5:22: runs.max_artifact_bytes: expected an integer from 65536 to 1099511627776, got 4096"});
}

TEST_CASE("runs: the memory one run holds of results not written yet, 512 MiB by default, at least 16 MiB") {
  const std::string worker = "[[worker]]\nname = \"w\"\n";
  LoadResult plain = parseFleetConfig(kAgent + worker, "fleet.toml");
  REQUIRE(plain.ok());
  CHECK(plain.config->runs.max_run_memory_bytes == int64_t{512} << 20);
  LoadResult set = parseFleetConfig(kAgent + "[runs]\nmax_run_memory_bytes = 2147483648\n" + worker, "fleet.toml");
  REQUIRE(set.ok());
  CHECK(set.config->runs.max_run_memory_bytes == int64_t{2} << 30);
  REQUIRE(errorsOf(kAgent + "[runs]\nmax_run_memory_bytes = 1048576\n" + worker) ==
          std::vector<std::string>{"fleet.toml:5:24: runs.max_run_memory_bytes: expected an integer from 16777216 to "
                                   "1099511627776, got 1048576"});
}

TEST_CASE("limits.max_image_bytes and agent.image_roots") {
  // Defaults: 64 MiB uploads, no server-side image paths.
  const std::string worker = "[[worker]]\nname = \"w\"\n" + usbBoard("a", "S");
  LoadResult plain = parseFleetConfig(kAgent + worker, "fleet.toml");
  REQUIRE(plain.ok());
  REQUIRE(plain.config->limits.max_image_bytes == 64 * 1024 * 1024);
  REQUIRE(plain.config->agent.image_roots.empty());
  LoadResult set = parseFleetConfig(kAgent + "image_roots = [\"/srv/firmware/\", \"/opt/images\"]\n"
                                               "[limits]\nmax_image_bytes = 2048\n" + worker,
                                    "fleet.toml");
  REQUIRE(set.ok());
  REQUIRE(set.config->agent.image_roots == std::vector<std::string>{"/srv/firmware", "/opt/images"});
  REQUIRE(set.config->limits.max_image_bytes == 2048);
  auto errors = errorsOf(kAgent + "image_roots = [\"firmware\", \"/\", \"/srv/a\\nb\"]\n"
                                  "[limits]\nmax_image_bytes = 100\n" + worker);
  REQUIRE(errors == std::vector<std::string>{
                        "fleet.toml:4:16: agent.image_roots[0]: expected an absolute directory path, got \"firmware\"",
                        "fleet.toml:4:28: agent.image_roots[1]: \"/\" would allow every file on the server; name "
                        "the directories of images",
                        "fleet.toml:4:33: agent.image_roots[2]: control characters are not allowed in a path",
                        "fleet.toml:6:19: limits.max_image_bytes: expected an integer from 1024 to 4294967296, "
                        "got 100"});
}

TEST_CASE("limits.max_console_streams defaults to 8 per lease and is bounded") {
  LoadResult ok = parseFleetConfig(kAgent + "[[worker]]\nname = \"w\"\n", "fleet.toml");
  REQUIRE(ok.config);
  REQUIRE(ok.config->limits.max_console_streams == 8);
  LoadResult two = parseFleetConfig(kAgent + "[limits]\nmax_console_streams = 2\n[[worker]]\nname = \"w\"\n", "fleet.toml");
  REQUIRE(two.config);
  REQUIRE(two.config->limits.max_console_streams == 2);
  auto errors = errorsOf(kAgent + "[limits]\nmax_console_streams = 0\n[[worker]]\nname = \"w\"\n");
  REQUIRE(errors == std::vector<std::string>{"fleet.toml:5:23: limits.max_console_streams: expected an integer "
                                             "from 1 to 1000, got 0"});
}

// Issue 9, item 13: console logs get quotas and leave a reserve for the
// database.
TEST_CASE("console log quotas and the disk reserve have defaults and bounds") {
  LoadResult ok = parseFleetConfig(kAgent + "[[worker]]\nname = \"w\"\n", "fleet.toml");
  REQUIRE(ok.ok());
  CHECK(ok.config->limits.console_log_bytes_per_lease == 64 * 1024 * 1024);
  CHECK(ok.config->limits.console_log_bytes_total == 1024 * 1024 * 1024);
  CHECK(ok.config->limits.disk_reserve_bytes == 64 * 1024 * 1024);
  LoadResult set = parseFleetConfig(kAgent +
                                        "[limits]\nconsole_log_bytes_per_lease = 65536\nconsole_log_bytes_total = "
                                        "1048576\ndisk_reserve_bytes = 0\n[[worker]]\nname = \"w\"\n",
                                    "fleet.toml");
  REQUIRE(set.ok());
  CHECK(set.config->limits.console_log_bytes_per_lease == 65536);
  CHECK(set.config->limits.console_log_bytes_total == 1048576);
  CHECK(set.config->limits.disk_reserve_bytes == 0);
  REQUIRE(errorsOf(kAgent + "[limits]\nconsole_log_bytes_per_lease = 100\ndisk_reserve_bytes = -1\n"
                            "[[worker]]\nname = \"w\"\n") ==
          std::vector<std::string>{
              "fleet.toml:5:31: limits.console_log_bytes_per_lease: expected an integer from 4096 to "
              "1099511627776, got 100",
              "fleet.toml:6:22: limits.disk_reserve_bytes: expected an integer from 0 to 1099511627776, got -1"});
  REQUIRE(errorsOf(kAgent + "[limits]\nconsole_log_bytes_per_lease = 2097152\nconsole_log_bytes_total = 1048576\n"
                            "[[worker]]\nname = \"w\"\n") ==
          std::vector<std::string>{"fleet.toml:5:31: limits.console_log_bytes_per_lease: must not exceed "
                                   "limits.console_log_bytes_total (1048576)"});
  REQUIRE(errorsOf(kAgent + "[limits]\nconsole_log_bytes_total = 1048576\n[[worker]]\nname = \"w\"\n") ==
          std::vector<std::string>{"fleet.toml:5:27: limits.console_log_bytes_total: must be at least "
                                   "limits.console_log_bytes_per_lease (67108864)"});
}

// Issue 9, item 11: a 40,000-part dotted key overflowed toml++'s stack
// (rc 139). Such shapes are refused before toml++ sees them, with a position.
TEST_CASE("a deep dotted key or deep nesting is refused with its position before toml++ parses it") {
  std::string deep;
  for (int i = 0; i < 40000; ++i) deep += i ? ".a" : "a";
  REQUIRE(errorsOf(kAgent + deep + " = 1\n") ==
          std::vector<std::string>{"fleet.toml:4:1: dotted key has more than 32 parts (the limit)"});
  // In a table header, an inline table and with spaces and quoted parts.
  REQUIRE(errorsOf(kAgent + "[" + deep + "]\n") ==
          std::vector<std::string>{"fleet.toml:4:2: dotted key has more than 32 parts (the limit)"});
  REQUIRE(errorsOf(kAgent + "x = { " + deep + " = 1 }\n") ==
          std::vector<std::string>{"fleet.toml:4:7: dotted key has more than 32 parts (the limit)"});
  std::string spaced;
  for (int i = 0; i < 33; ++i) spaced += i ? (i % 2 ? " . \"a\"" : " .'b'") : "  a";
  REQUIRE(errorsOf(kAgent + spaced + " = 1\n") ==
          std::vector<std::string>{"fleet.toml:4:3: dotted key has more than 32 parts (the limit)"});
  // Arrays and inline tables nested 40,000 deep.
  REQUIRE(errorsOf(kAgent + "x = " + std::string(40000, '[') + std::string(40000, ']') + "\n") ==
          std::vector<std::string>{"fleet.toml:4:37: arrays and inline tables nest deeper than 32 levels (the limit)"});
  REQUIRE(errorsOf(kAgent + "x = " + std::string(20000, '{') + "\n") ==
          std::vector<std::string>{"fleet.toml:4:37: arrays and inline tables nest deeper than 32 levels (the limit)"});
  // The tokens file goes through the same check.
  auto tokens = hwfarm::config::parseTokens(deep + " = 1\n", "tokens.toml");
  REQUIRE(tokens.errors.size() == 1);
  REQUIRE(tokens.errors[0].format() == "tokens.toml:1:1: dotted key has more than 32 parts (the limit)");
}

TEST_CASE("keys of 32 parts and dots inside strings and comments are not refused") {
  std::string key32;
  for (int i = 0; i < 32; ++i) key32 += i ? ".a" : "a";
  // 32 parts reach toml++ (and the schema, which does not know the key).
  REQUIRE(errorsOf(kAgent + "[[worker]]\nname = \"w\"\n" + key32 + " = 1\n") ==
          std::vector<std::string>{"fleet.toml:6:1: worker \"w\": a: unknown key"});
  std::string dots(200, '.');
  std::string text = kAgent + "# " + dots + " [[[[\n" + "[[worker]]\nname = \"w\"\n  [[worker.board]]\n" +
                     "  name = \"b\"\n  type = \"t\"\n  driver = \"qemu\"\n" +
                     "  qemu = { extra_args = [\"" + dots + "\", '" + dots + "', \"\\\"" + dots + "[[[[{{{{\"] }\n" +
                     "  [worker.board.health]\n  banner = \"\"\"\n" + dots + "\n\"\" x \"\"\"\"\n" +
                     "  image = \'\'\'" + dots + "[[[[{{{{\n\'\'\'\n";
  REQUIRE(errorsOf(text).empty());
  // Arrays nested 32 deep are fine for the check (toml++ and the schema judge them).
  REQUIRE(errorsOf(kAgent + "[[worker]]\nname = \"w\"\nx = " + std::string(31, '[') + std::string(31, ']') + "\n") ==
          std::vector<std::string>{"fleet.toml:6:1: worker \"w\": x: unknown key"});
}

// Issue 9, item 10: a 20 MB value was echoed whole into the log and /v1/healthz.
TEST_CASE("a long or unprintable value is echoed escaped and cut at 128 bytes with its length") {
  std::string long_name(1000000, 'n');
  auto errors = errorsOf("[agent]\nname = \"" + long_name + "\"\ntier = 2\n[[worker]]\nname = \"w\"\n");
  REQUIRE(errors.size() == 1);
  REQUIRE(errors[0] == "fleet.toml:2:8: agent.name: expected a name of letters, digits, \".\", \"_\" or \"-\" that "
                       "starts with a letter or digit (at most 64 characters), got \"" +
                           std::string(128, 'n') + "\xe2\x80\xa6\" (1000000 bytes)");
  errors = errorsOf("[agent]\nname = \"a\\u0000b\\n\\\"\\u007f\"\ntier = 2\n[[worker]]\nname = \"w\"\n");
  REQUIRE(errors.size() == 1);
  REQUIRE(errors[0].find("got \"a\\x00b\\n\\\"\\x7f\"") != std::string::npos);
  // A long unknown key is cut the same way.
  errors = errorsOf(kAgent + "[[worker]]\nname = \"w\"\n\"" + std::string(5000, 'k') + "\" = 1\n");
  REQUIRE(errors == std::vector<std::string>{"fleet.toml:6:1: worker \"w\": " + std::string(128, 'k') +
                                             "\xe2\x80\xa6 (5000 bytes): unknown key"});
}

TEST_CASE("echo keeps valid UTF-8 whole and escapes invalid bytes") {
  using hwfarm::config::echo;
  using hwfarm::config::quoteForMessage;
  REQUIRE(echo("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");
  REQUIRE(echo("\xff\xfe/\xc3") == "\\xff\\xfe/\\xc3");           // stray bytes, a truncated sequence
  REQUIRE(echo("\xed\xa0\x80") == "\\xed\\xa0\\x80");             // a surrogate
  REQUIRE(echo("\xc0\xaf") == "\\xc0\\xaf");                      // an overlong "/"
  REQUIRE(echo("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");    // above U+10FFFF
  // A cut never splits a character: 3 bytes of "é" fit in 4, the fourth would split one.
  REQUIRE(echo("ab\xc3\xa9\xc3\xa9", 5) == "ab\xc3\xa9\xe2\x80\xa6 (6 bytes)");
  REQUIRE(quoteForMessage(std::string(10, 'x'), 4) == "\"xxxx\xe2\x80\xa6\" (10 bytes)");
  REQUIRE(quoteForMessage("short") == "\"short\"");
  REQUIRE(hwfarm::config::isValidUtf8("caf\xc3\xa9"));
  REQUIRE(!hwfarm::config::isValidUtf8("caf\xc3"));
  REQUIRE(hwfarm::config::findControlCharacter(std::string("ab\0c", 4)) == 2);
  REQUIRE(hwfarm::config::findControlCharacter("ab\x7f") == 2);
  REQUIRE(hwfarm::config::findControlCharacter("tab-free caf\xc3\xa9") == std::string_view::npos);
}

TEST_CASE("at most 100 errors are reported per file and the rest are counted") {
  std::string text = kAgent + "[[worker]]\nname = \"w\"\n";
  for (int i = 0; i < 150; ++i) text += "unknown" + std::to_string(i) + " = 1\n";
  auto errors = errorsOf(text);
  REQUIRE(errors.size() == 101);
  REQUIRE(errors[99].find("unknown99: unknown key") != std::string::npos);
  REQUIRE(errors[100] == "fleet.toml: and 50 more error(s) not shown (at most 100 are reported per file)");
}

// Issue 9, item 4: a group- or world-writable tokens file passed, so a local
// user could add an operator token for the next SIGHUP to load.
TEST_CASE("a tokens file open to group or others, a symlink or another owner's file is refused") {
  hwfarm::test::TempDir dir;
  std::string text = "[[token]]\nname = \"ci\"\nrole = \"operator\"\nsha256 = \"" + std::string(64, 'a') + "\"\n";
  std::string path = dir.write("tokens.toml", text);
  auto errorOf = [](const std::string& file) {
    auto r = hwfarm::config::loadTokensFile(file);
    REQUIRE(r.tokens.empty());
    REQUIRE(r.errors.size() == 1);
    return r.errors[0].format();
  };
  for (unsigned mode : {0602u, 0620u, 0660u, 0640u, 0604u, 0606u, 0610u, 0601u}) {
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    INFO("mode " << octal);
    REQUIRE(errorOf(path) == path + ": tokens file is open to group or others (mode " + octal +
                                 "); only its owner may read or write it; run: chmod go-rwx " + path);
  }
  // 0600 (and 0400) is accepted.
  for (unsigned mode : {0600u, 0400u}) {
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    auto ok = hwfarm::config::loadTokensFile(path);
    REQUIRE(ok.ok());
    REQUIRE(ok.tokens.size() == 1);
  }
  ::chmod(path.c_str(), 0600);
  // A symbolic link is refused even when its target is fine.
  std::string link = dir.file("link.toml");
  REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
  REQUIRE(errorOf(link) == link + ": tokens file is a symbolic link; name the file itself (symbolic links are refused)");
  // A FIFO is not a regular file (and does not block the open).
  std::string fifo = dir.file("fifo.toml");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(errorOf(fifo) == fifo + ": not a regular file");
  // A file owned by another user, even with mode 0600.
  uid_t self = ::geteuid();
  REQUIRE(self == 0); // the test suite runs as root (CI's container and the lab image)
  std::string foreign = dir.write("foreign.toml", text);
  REQUIRE(::chmod(foreign.c_str(), 0600) == 0);
  REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0); // nobody
  REQUIRE(errorOf(foreign) == foreign + ": tokens file is owned by uid 65534, not by hwfarmd's user (uid 0) or root; "
                                        "run: chown 0 " + foreign);
}

// Issue 9, item 10: no file is read without a bound.
TEST_CASE("an oversized config or tokens file is refused without reading it all") {
  hwfarm::test::TempDir dir;
  std::string big = dir.write("big.toml", std::string(hwfarm::config::kMaxConfigBytes + 1, '#'));
  auto config = hwfarm::config::loadFleetConfigFile(big);
  REQUIRE(config.errors.size() == 1);
  REQUIRE(config.errors[0].format() == big + ": file is larger than 4194304 bytes, the limit for a config file");
  auto zero = hwfarm::config::loadFleetConfigFile("/dev/zero");
  REQUIRE(zero.errors.size() == 1);
  REQUIRE(zero.errors[0].format() == "/dev/zero: file is larger than 4194304 bytes, the limit for a config file");
  std::string tokens = dir.write("tokens.toml", std::string(hwfarm::config::kMaxTokensBytes + 1, '#'));
  ::chmod(tokens.c_str(), 0600);
  auto t = hwfarm::config::loadTokensFile(tokens);
  REQUIRE(t.errors.size() == 1);
  REQUIRE(t.errors[0].format() == tokens + ": file is larger than 1048576 bytes, the limit for a tokens file");
  // A file of exactly the limit is read.
  std::string fits = dir.write("fits.toml", std::string(hwfarm::config::kMaxConfigBytes, '#'));
  auto read = hwfarm::config::loadFleetConfigFile(fits);
  REQUIRE(read.errors.at(0).message == "agent: required key is missing"); // parsed, not refused
}

TEST_CASE("a TOML syntax error quoting the file is escaped and bounded") {
  std::string key(100000, 'k');
  auto errors = errorsOf("\"" + key + "\" = 1\n\"" + key + "\" = 2\n");
  REQUIRE(errors.size() == 1);
  REQUIRE(errors[0].size() < 1024);
  errors = errorsOf("x = \"a\xff\"\n");
  REQUIRE(errors.size() == 1);
  REQUIRE(errors[0].find('\xff') == std::string::npos);
  REQUIRE(hwfarm::config::isValidUtf8(errors[0]));
}

TEST_CASE("should_run tag patterns are read and each bad one is reported where it stands") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  LoadResult ok = parseFleetConfig(kAgent + board +
                                       "[should_run]\ntags = [\"microtvm\"]\nlabels = [\"hw-ci\"]\n"
                                       "bot_commands = [\"@tvm-bot run-odt\"]\n",
                                   "fleet.toml");
  REQUIRE(ok.errors.empty());
  CHECK(ok.config->should_run.tags == std::vector<std::string>{"microtvm"});
  CHECK(ok.config->should_run.labels == std::vector<std::string>{"hw-ci"});
  CHECK(ok.config->should_run.bot_commands == std::vector<std::string>{"@tvm-bot run-odt"});

  auto errors = errorsOf(kAgent + board +
                         "[should_run]\ntags = [\"micro tvm\", \"[x]\", \"\"]\nlabels = \"hw-ci\"\n"
                         "bot_commands = [\" @bot\", \"@bot\\trun\"]\nbot = 1\n");
  CHECK(errors == std::vector<std::string>{
                      "fleet.toml:11:9: should_run.tags[0]: expected a word without spaces, control characters, "
                      "\"[\", \"]\" or \",\", got \"micro tvm\"",
                      "fleet.toml:11:22: should_run.tags[1]: expected a word without spaces, control characters, "
                      "\"[\", \"]\" or \",\", got \"[x]\"",
                      "fleet.toml:11:29: should_run.tags[2]: expected 1 to 64 characters, got \"\"",
                      "fleet.toml:12:10: should_run.labels: expected an array of strings, got \"hw-ci\"",
                      "fleet.toml:13:17: should_run.bot_commands[0]: expected printable words separated by spaces, "
                      "got \" @bot\"",
                      "fleet.toml:13:26: should_run.bot_commands[1]: expected printable words separated by spaces, "
                      "got \"@bot\\trun\"",
                      "fleet.toml:14:1: should_run.bot: unknown key (did you mean \"bot_commands\"?)"});
}

TEST_CASE("twister mappings name a board type of the fleet once with a platform and a runner") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  LoadResult ok = parseFleetConfig(kAgent + board +
                                       "[[twister]]\ntype = \"nucleo\"\nplatform = \"nucleo_f429zi\"\n"
                                       "runner = \"openocd\"\nproduct = \"STM32 STLink\"\nbaud = 921600\n",
                                   "fleet.toml");
  REQUIRE(ok.errors.empty());
  REQUIRE(ok.config->twister.size() == 1);
  CHECK(ok.config->twister[0].platform == "nucleo_f429zi");
  CHECK(ok.config->twister[0].runner == "openocd");
  CHECK(ok.config->twister[0].product == "STM32 STLink");
  CHECK(ok.config->twister[0].baud == 921600);

  auto errors = errorsOf(kAgent + board +
                         "[[twister]]\ntype = \"stm32\"\nplatform = \"x\"\nrunner = \"openocd\"\n"
                         "[[twister]]\ntype = \"nucleo\"\nplatform = \"nucleo f429\"\n"
                         "[[twister]]\ntype = \"nucleo\"\nplatform = \"p\"\nrunner = \"jlink\"\nbaud = 0\n");
  CHECK(errors == std::vector<std::string>{
                      "fleet.toml:11:8: twister #1: twister.type: no board has type \"stm32\"",
                      "fleet.toml:14:1: twister #2: twister.runner: required key is missing",
                      "fleet.toml:16:12: twister #2: twister.platform: expected a twister platform name of letters, "
                      "digits and \"_./@+-\" (at most 128 characters), got \"nucleo f429\"",
                      "fleet.toml:18:8: twister #3: twister.type: twister entry for board type \"nucleo\" is already "
                      "used (first defined at fleet.toml:15:8)",
                      "fleet.toml:21:8: twister #3: twister.baud: expected an integer from 50 to 4000000, got 0"});
}

TEST_CASE("runs settings and [[reference]] simulators are checked, with the key and its place") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  LoadResult ok = parseFleetConfig(kAgent + "[runs]\nmax_simulators = 3\n" + board +
                                       "[[reference]]\ntype = \"nucleo\"\nmachine = \"mps2-an386\"\ncpu = \"cortex-m4\"\n",
                                   "fleet.toml");
  REQUIRE(ok.errors.empty());
  CHECK(ok.config->runs.max_simulators == 3);
  CHECK(ok.config->runs.max_runs == 16);
  REQUIRE(ok.config->references.size() == 1);
  CHECK(ok.config->references[0].type == "nucleo");
  CHECK(ok.config->references[0].qemu.machine == "mps2-an386");
  CHECK(ok.config->references[0].qemu.cpu == "cortex-m4");
  CHECK(ok.config->references[0].qemu.binary == "qemu-system-arm");

  auto errors = errorsOf(kAgent + "[runs]\nmax_simulators = 0\n" + board +
                         "[[reference]]\ntype = \"stm32\"\nmachine = \"mps2-an386\"\n"
                         "[[reference]]\ntype = \"nucleo\"\n"
                         "[[reference]]\ntype = \"nucleo\"\nmachine = \"mps2 an386\"\ncolour = 1\n"
                         "[[reference]]\ntype = \"nucleo\"\nmachine = \"mps2-an500\"\n");
  CHECK(errors == std::vector<std::string>{
                      "fleet.toml:5:18: runs.max_simulators: expected an integer from 1 to 64, got 0",
                      "fleet.toml:13:8: reference #1: reference.type: no board has type \"stm32\"",
                      "fleet.toml:15:1: reference #2: reference.machine: required key is missing",
                      "fleet.toml:18:8: reference #3: reference.type: reference for board type \"nucleo\" is already "
                      "used (first defined at fleet.toml:16:8)",
                      "fleet.toml:19:11: reference #3: reference.machine: expected a QEMU machine name like "
                      "\"mps2-an385\", got \"mps2 an386\"",
                      "fleet.toml:20:1: reference #3: reference.colour: unknown key",
                      "fleet.toml:22:8: reference #4: reference.type: reference for board type \"nucleo\" is already "
                      "used (first defined at fleet.toml:16:8)"});
}

TEST_CASE("[upload] settings are checked with the key and its place and default to off") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  LoadResult off = parseFleetConfig(kAgent + board, "fleet.toml");
  REQUIRE(off.errors.empty());
  CHECK_FALSE(off.config->upload.enabled);
  LoadResult ok = parseFleetConfig(kAgent + board +
                                       "[upload]\nenabled = true\nendpoint = \"https://s3.example.com:9000/\"\n"
                                       "bucket = \"hw-results\"\nprefix = \"lab 1/results\"\n"
                                       "credentials_file = \"/etc/hwfarm/s3.toml\"\nretry_max_s = 60\n",
                                   "fleet.toml");
  REQUIRE(ok.errors.empty());
  const auto& u = ok.config->upload;
  CHECK(u.enabled);
  CHECK(u.endpoint == "https://s3.example.com:9000");
  CHECK(u.region == "us-east-1");
  CHECK(u.bucket == "hw-results");
  CHECK(u.prefix == "lab 1/results");
  CHECK(u.credentials_file == "/etc/hwfarm/s3.toml");
  CHECK(u.retry_initial_s == 1);
  CHECK(u.retry_max_s == 60);

  // Lines 10 on: the [upload] table.
  auto errors = errorsOf(kAgent + board +
                         "[upload]\nenabled = true\nendpoint = \"ftp://s3.example.com\"\nregion = \"US East\"\n"
                         "bucket = \"Hw_Results\"\nprefix = \"/lab\"\ncredentials_file = \"s3.toml\"\n"
                         "retry_initial_s = 10\nretry_max_s = 5\ncolour = 1\n");
  CHECK(errors == std::vector<std::string>{
                      "fleet.toml:12:12: upload.endpoint: expected an http:// or https:// URL like "
                      "\"https://s3.example.com\" or \"http://127.0.0.1:4568\" (no user, query or fragment), got "
                      "\"ftp://s3.example.com\"",
                      "fleet.toml:13:10: upload.region: expected a region like \"us-east-1\", got \"US East\"",
                      "fleet.toml:14:10: upload.bucket: expected an S3 bucket name (3 to 63 lower-case letters, "
                      "digits, \".\" or \"-\"), got \"Hw_Results\"",
                      "fleet.toml:15:10: upload.prefix: must not start or end with \"/\" (keys are "
                      "<prefix>/<agent>/...), got \"/lab\"",
                      "fleet.toml:16:20: upload.credentials_file: expected an absolute path, got \"s3.toml\"",
                      "fleet.toml:18:15: upload.retry_max_s: must not be below upload.retry_initial_s (10)",
                      "fleet.toml:19:1: upload.colour: unknown key"});
  // Enabled, it needs a place to go and the key to get there.
  errors = errorsOf(kAgent + board + "[upload]\nenabled = true\n");
  CHECK(errors == std::vector<std::string>{"fleet.toml:10:1: upload.endpoint: required key is missing",
                                           "fleet.toml:10:1: upload.bucket: required key is missing",
                                           "fleet.toml:10:1: upload.credentials_file: required key is missing"});
}

TEST_CASE("the upload credentials file is refused when its group or others may read it and names the file") {
  hwfarm::test::TempDir dir;
  std::string path = dir.write("s3.toml", "access_key_id = \"AKIDEXAMPLE\"\nsecret_access_key = \"wJalr/K7+x\"\n");
  for (unsigned mode : {0640u, 0604u, 0660u, 0644u}) {
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    auto r = hwfarm::config::loadCredentialsFile(path);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].format() == path + ": credentials file is open to group or others (mode " + octal +
                                      "); only its owner may read or write it; run: chmod go-rwx " + path);
    CHECK(r.credentials.secret_access_key.empty());
  }
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  auto ok = hwfarm::config::loadCredentialsFile(path);
  REQUIRE(ok.ok());
  CHECK(ok.credentials.access_key_id == "AKIDEXAMPLE");
  CHECK(ok.credentials.secret_access_key == "wJalr/K7+x");
  // Errors have their place and never quote the secret.
  auto bad = hwfarm::config::parseCredentials("access_key_id = \"a b\"\nsecret_access_key = 5\nextra = 1\n", "s3.toml");
  std::vector<std::string> messages;
  for (const auto& e : bad.errors) messages.push_back(e.format());
  CHECK(messages == std::vector<std::string>{
                        "s3.toml:1:17: access_key_id: expected 1 to 256 printable ASCII characters without spaces",
                        "s3.toml:2:21: secret_access_key: expected a string, got 5",
                        "s3.toml:3:1: extra: unknown key"});
  auto missing = hwfarm::config::parseCredentials("", "s3.toml");
  REQUIRE(missing.errors.size() == 2);
}

TEST_CASE("[results] infrastructure rules are read in order with their texts and default_rules") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  LoadResult none = parseFleetConfig(kAgent + board, "fleet.toml");
  REQUIRE(none.errors.empty());
  CHECK(none.config->results.default_rules);
  CHECK(none.config->results.infrastructure.empty());

  // Lines 10 on: the [results] table and its rules.
  LoadResult ok = parseFleetConfig(kAgent + board +
                                       "[results]\n"
                                       "default_rules = false\n"
                                       "[[results.infrastructure]]\n"
                                       "name = \"usb hub reset\"\n"
                                       "detail = \"usb 1-1.4: USB disconnect\"\n"
                                       "[[results.infrastructure]]\n"
                                       "name = \"every field: a BoardError\"\n"
                                       "error = \"BoardError\"\n"
                                       "type = \"hwlab.\"\n"
                                       "message = \"failed on setup with \\\"hwlab.BoardError\"\n"
                                       "detail = \"conftest.py\"\n",
                                   "fleet.toml");
  for (const auto& e : ok.errors) INFO(e.format());
  REQUIRE(ok.errors.empty());
  const auto& r = ok.config->results;
  CHECK_FALSE(r.default_rules);
  REQUIRE(r.infrastructure.size() == 2);
  CHECK(r.infrastructure[0].name == "usb hub reset");
  CHECK(r.infrastructure[0].detail == "usb 1-1.4: USB disconnect");
  CHECK(r.infrastructure[0].error.empty());
  CHECK(r.infrastructure[0].type.empty());
  CHECK(r.infrastructure[0].message.empty());
  CHECK(r.infrastructure[0].pos.line == 12);
  CHECK(r.infrastructure[1].name == "every field: a BoardError");
  CHECK(r.infrastructure[1].error == "BoardError");
  CHECK(r.infrastructure[1].type == "hwlab.");
  CHECK(r.infrastructure[1].message == "failed on setup with \"hwlab.BoardError");
  CHECK(r.infrastructure[1].detail == "conftest.py");
  CHECK(r.infrastructure[1].pos.line == 15);

  // default_rules alone; true by default.
  LoadResult defaults = parseFleetConfig(kAgent + board + "[results]\ndefault_rules = true\n", "fleet.toml");
  REQUIRE(defaults.errors.empty());
  CHECK(defaults.config->results.default_rules);
  CHECK(errorsOf(kAgent + board + "[results]\ndefault_rules = \"no\"\n") ==
        std::vector<std::string>{"fleet.toml:11:17: results.default_rules: expected true or false, got \"no\""});
}

TEST_CASE("[results] infrastructure rules: a name missing or used twice or bad and a rule without text are errors") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  // Lines 10 on.
  auto errors = errorsOf(kAgent + board +
                         "[[results.infrastructure]]\n"          // 10: #1
                         "error = \"SerialException\"\n"
                         "[[results.infrastructure]]\n"          // 12: #2
                         "name = \"serial\"\n"
                         "error = \"SerialException\"\n"
                         "[[results.infrastructure]]\n"          // 15: #3
                         "name = \"serial\"\n"
                         "message = \"could not open port\"\n"
                         "[[results.infrastructure]]\n"          // 18: #4
                         "name = \"no text\"\n"
                         "[[results.infrastructure]]\n"          // 20: #5
                         "name = \"\"\n"
                         "type = \"X\"\n"
                         "[[results.infrastructure]]\n"          // 23: #6
                         "name = \"tab\\there\"\n"
                         "type = \"X\"\n");
  CHECK(errors == std::vector<std::string>{
                      "fleet.toml:10:1: results.infrastructure #1: results.infrastructure.name: required key is missing",
                      "fleet.toml:16:8: results.infrastructure #3: results.infrastructure.name: rule \"serial\" is "
                      "already used (first defined at fleet.toml:13:8)",
                      "fleet.toml:19:8: results.infrastructure #4: results.infrastructure.name: rule \"no text\" "
                      "matches every error: give error, type, message or detail (text the error's must contain)",
                      "fleet.toml:21:8: results.infrastructure #5: results.infrastructure.name: expected 1 to 128 "
                      "printable characters, got \"\"",
                      "fleet.toml:24:8: results.infrastructure #6: results.infrastructure.name: expected 1 to 128 "
                      "printable characters, got \"tab\\there\""});
  // 128 characters: the longest name.
  LoadResult longest = parseFleetConfig(kAgent + board + "[[results.infrastructure]]\nname = \"" +
                                            std::string(128, 'r') + "\"\nerror = \"E\"\n",
                                        "fleet.toml");
  REQUIRE(longest.errors.empty());
  CHECK(longest.config->results.infrastructure.at(0).name == std::string(128, 'r'));
  CHECK(errorsOf(kAgent + board + "[[results.infrastructure]]\nname = \"" + std::string(129, 'r') +
                 "\"\nerror = \"E\"\n") ==
        std::vector<std::string>{"fleet.toml:11:8: results.infrastructure #1: results.infrastructure.name: expected 1 "
                                 "to 128 printable characters, got \"" +
                                 std::string(128, 'r') + "\xe2\x80\xa6\" (129 bytes)"});
}

TEST_CASE("[results] infrastructure rules: texts of 1 to 1024 bytes and strings only and unknown keys") {
  std::string board = "[[worker]]\nname = \"w\"\n" + usbBoard("n0", "S0");
  LoadResult longest = parseFleetConfig(kAgent + board + "[[results.infrastructure]]\nname = \"long\"\ndetail = \"" +
                                            std::string(1024, 'd') + "\"\n",
                                        "fleet.toml");
  REQUIRE(longest.errors.empty());
  CHECK(longest.config->results.infrastructure.at(0).detail.size() == 1024);
  // Lines 10 on.
  auto errors = errorsOf(kAgent + board +
                         "[results]\n"                           // 10
                         "default_rule = true\n"
                         "[[results.infrastructure]]\n"          // 12: #1
                         "name = \"too long\"\n"
                         "message = \"" + std::string(1025, 'm') + "\"\n"
                         "[[results.infrastructure]]\n"          // 15: #2
                         "name = \"empty\"\n"
                         "error = \"\"\n"
                         "[[results.infrastructure]]\n"          // 18: #3
                         "name = \"number\"\n"
                         "type = 5\n"
                         "detail = \"ok\"\n"
                         "[[results.infrastructure]]\n"          // 22: #4
                         "name = \"colour\"\n"
                         "error = \"E\"\n"
                         "colour = 1\n");
  CHECK(errors == std::vector<std::string>{
                      "fleet.toml:11:1: results.default_rule: unknown key (did you mean \"default_rules\"?)",
                      "fleet.toml:14:11: results.infrastructure #1: results.infrastructure.message: expected 1 to "
                      "1024 bytes of text the error's must contain, got \"" +
                          std::string(128, 'm') + "\xe2\x80\xa6\" (1025 bytes)",
                      "fleet.toml:17:9: results.infrastructure #2: results.infrastructure.error: expected 1 to 1024 "
                      "bytes of text the error's must contain, got \"\"",
                      "fleet.toml:20:8: results.infrastructure #3: results.infrastructure.type: expected a string, "
                      "got 5",
                      "fleet.toml:25:1: results.infrastructure #4: results.infrastructure.colour: unknown key"});
  // [results] itself: an unknown key.
  CHECK(errorsOf(kAgent + board + "[results]\ninfra = 1\n") ==
        std::vector<std::string>{"fleet.toml:11:1: results.infra: unknown key (did you mean \"infrastructure\"?)"});
}
