// Issue 9 item 3: an image path (or USB serial) with hostile characters
// never changes what a flasher does. For every preset, each hostile name is
// either passed as exactly one value of the tool's language or refused with
// a clear error. OpenOCD's Tcl is checked with a real Tcl interpreter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "config/driver_specs.h"
#include "drivers/flasher.h"
#include "tests/support/process.h"

using namespace hwfarm::drivers;
using hwfarm::test::readFile;
using hwfarm::test::runCommand;
using hwfarm::test::TempDir;

namespace {

hwfarm::config::FlashConfig preset(const std::string& driver) {
  hwfarm::config::FlashConfig c;
  c.driver = driver;
  for (const auto& o : hwfarm::config::findFlashDriver(driver)->options)
    if (o.default_value) c.options[o.key] = o.default_value;
  if (driver == "openocd") c.options["target"] = "target/stm32f4x.cfg";
  if (driver == "pyocd") c.options["target"] = "stm32f429zi";
  if (driver == "jlink") c.options["device"] = "STM32F429ZI";
  if (driver == "command") c.argv = {"/opt/flash", "--image", "{image}", "--sn={usb_serial}"};
  return c;
}

struct Hostile {
  const char* label;
  std::string path;
};

std::vector<Hostile> hostileNames() {
  return {{"a closing brace", "/srv/fw/x} ; dump_image /etc/passwd 0 1 ; {.elf"},
          {"a bracket", "/srv/fw/x[dump_image /tmp/owned 0 4].elf"},
          {"a newline", "/srv/fw/x.bin 0\nexec /bin/sh\nloadfile y.bin"},
          {"a command substitution", "/srv/fw/$(touch /tmp/owned).elf"},
          {"spaces", "/srv/fw/my firmware image.elf"},
          {"a 1 KiB name", "/srv/fw/" + std::string(1024, 'a') + ".elf"}};
}

// Evaluates OpenOCD's `-c` words in tclsh with procs that record what they
// receive. `program` copies OpenOCD 0.12's (src/flash/startup.tcl): it
// wraps the file name in braces and evaluates it again. Any other command
// (dump_image, exec, ...) records an injection.
std::string tclEvaluate(const TempDir& dir, const std::vector<std::string>& argv) {
  std::string script =
      "set out [open [lindex $argv 0] w]\n"
      "proc adapter {what value} { puts $::out \"adapter $what=<$value>\" }\n"
      "proc write_image {filename} { puts $::out \"image=<$filename>\" }\n"
      "proc program {filename args} {\n"
      "  set filename \\{$filename\\}\n"
      "  set flash_args \"$filename\"\n"
      "  eval write_image $flash_args\n"
      "  puts $::out \"program args=<$args>\"\n"
      "}\n"
      "proc reset_config {args} { puts $::out \"reset_config <[join $args |]>\" }\n"
      "proc unknown {args} { puts $::out \"INJECTED <$args>\" }\n"
      "rename exec {}\n"
      "foreach cmd [lrange $argv 1 end] { eval $cmd }\n"
      "close $out\n";
  std::string path = dir.write("openocd.tcl", script);
  std::vector<std::string> cmd{TCLSH_PATH, path, dir.file("tcl.out")};
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "-c") cmd.push_back(argv[i + 1]);
  auto r = runCommand(cmd);
  INFO(r.err);
  REQUIRE(r.status.exited);
  REQUIRE(r.status.code == 0);
  return readFile(dir.file("tcl.out"));
}

// flashArgv's argv, or an empty one with `*error` set to the refusal's
// message (and checked to be a refusal): the shape these tables read.
std::vector<std::string> argvOrRefusal(const hwfarm::config::FlashConfig& c, const std::string& image,
                                       const FlashTarget& t, const std::string& scratch, std::string* error) {
  auto argv = flashArgv(c, image, t, scratch);
  if (argv) {
    error->clear();
    return *argv;
  }
  CHECK(argv.status().is(hwfarm::Code::invalid_argument));
  CHECK(argv.status().isInfrastructure());
  *error = argv.status().message();
  return {};
}

size_t count(const std::vector<std::string>& argv, const std::string& value) {
  return static_cast<size_t>(std::count(argv.begin(), argv.end(), value));
}

} // namespace

TEST_CASE("openocd keeps a hostile image name one Tcl word or refuses it") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066DFF535155", "/dev/ttyACM3"};
  for (const auto& h : hostileNames()) {
    INFO(h.label);
    std::string error;
    auto argv = argvOrRefusal(preset("openocd"), h.path, t, dir.path(), &error);
    if (std::string(h.label) == "a 1 KiB name") {
      REQUIRE(error.empty());
      REQUIRE(tclEvaluate(dir, argv) == "adapter serial=<066DFF535155>\nimage=<" + h.path +
                                            ">\nprogram args=<verify reset exit>\n");
      continue;
    }
    REQUIRE(argv.empty());
    // Control characters are refused first, wherever they are.
    size_t at = h.path.find('\n') != std::string::npos ? h.path.find('\n') : h.path.find_first_of("}[$ ");
    char c = h.path[at];
    std::string shown = c == '\n' ? "the control character 0x0a" : std::string("'") + c + "'";
    std::string why = c == '\n' ? "" : ", which OpenOCD's program command cannot take safely";
    REQUIRE(error == "flash driver \"openocd\": the image path contains " + shown + " at byte " +
                         std::to_string(at) + why);
  }
}

TEST_CASE("openocd quotes a hostile USB serial so adapter serial gets exactly it") {
  TempDir dir;
  for (std::string serial : {"X} ; dump_image /tmp/owned 0 4 ; {", "X[dump_image /tmp/owned 0 4]", "$(id) \"a b\\",
                             "06 6D;exit"}) {
    INFO(serial);
    FlashTarget t{"nucleo-1", serial, "/dev/ttyACM3"};
    std::string error;
    auto argv = argvOrRefusal(preset("openocd"), "/var/lib/hwfarm/images/ab.elf", t, dir.path(), &error);
    REQUIRE(error.empty());
    REQUIRE(tclEvaluate(dir, argv) == "adapter serial=<" + serial +
                                          ">\nimage=</var/lib/hwfarm/images/ab.elf>\nprogram args=<verify reset exit>\n");
  }
  // An operator's -c argument gets the serial as one Tcl word too.
  auto with_extra = preset("openocd");
  with_extra.extra_args = {"-c", "reset_config srst_only {usb_serial}"};
  std::string serial = "X] ; dump_image /tmp/owned 0 4 ; [";
  std::string error;
  auto extra = argvOrRefusal(with_extra, "/x.elf", {"b", serial, ""}, dir.path(), &error);
  REQUIRE(error.empty());
  REQUIRE(tclEvaluate(dir, extra) == "adapter serial=<" + serial + ">\nimage=</x.elf>\nprogram args=<verify reset exit>\n"
                                     "reset_config <srst_only|" + serial + ">\n");
  auto argv = argvOrRefusal(preset("openocd"), "/x.elf", {"b", "X\n;exit", ""}, dir.path(), &error);
  REQUIRE(argv.empty());
  REQUIRE(error == "flash driver \"openocd\": the USB serial contains the control character 0x0a at byte 1");
}

TEST_CASE("the J-Link command file gets one loadfile line or a refusal") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066DFF535155", "/dev/ttyACM3"};
  std::string script = dir.file("jlink-nucleo-1.jlink");
  for (const auto& h : hostileNames()) {
    INFO(h.label);
    std::string error;
    auto argv = argvOrRefusal(preset("jlink"), h.path, t, dir.path(), &error);
    std::string label = h.label;
    if (label == "spaces") {
      REQUIRE(error.empty());
      REQUIRE(readFile(script) == "loadfile \"" + h.path + "\" 0x0\nr\ng\nexit\n");
    } else if (label == "a 1 KiB name") {
      REQUIRE(error.empty());
      REQUIRE(readFile(script) == "loadfile " + h.path + " 0x0\nr\ng\nexit\n");
    } else {
      REQUIRE(argv.empty());
      size_t at = h.path.find_first_of("}[\n$");
      char c = h.path[at];
      if (c == '\n')
        REQUIRE(error == "flash driver \"jlink\": the image path contains the control character 0x0a at byte " +
                             std::to_string(at));
      else
        REQUIRE(error == "flash driver \"jlink\": the image path contains '" + std::string(1, c) + "' at byte " +
                             std::to_string(at) + ", which a J-Link command file cannot take safely");
      // A refused name leaves no command file behind that a later run could use.
      std::remove(script.c_str());
    }
  }
  std::string error;
  REQUIRE(argvOrRefusal(preset("jlink"), "/x/a,b.bin", t, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"jlink\": the image path contains ',' at byte 4, which a J-Link command file "
                   "cannot take safely");
  REQUIRE(argvOrRefusal(preset("jlink"), "/x/a\"b.bin", t, dir.path(), &error).empty());
  REQUIRE(argvOrRefusal(preset("jlink"), "/x.bin", {"b", "-CommandFile", ""}, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"jlink\": the USB serial starts with '-', which the tool would read as an option");
}

TEST_CASE("argv presets pass a hostile image name as exactly one argument") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066DFF535155", "/dev/ttyACM3"};
  for (const char* driver : {"pyocd", "dfu-util", "st-flash", "esptool", "nrfjprog", "command"}) {
    for (const auto& h : hostileNames()) {
      INFO(driver << ": " << h.label);
      std::string error;
      auto argv = argvOrRefusal(preset(driver), h.path, t, dir.path(), &error);
      if (std::string(h.label) == "a newline") {
        REQUIRE(argv.empty());
        REQUIRE(error == "flash driver \"" + std::string(driver) +
                             "\": the image path contains the control character 0x0a at byte 15");
        continue;
      }
      // No shell and no command language: the name arrives whole, once.
      REQUIRE(error.empty());
      REQUIRE(count(argv, h.path) == 1);
      auto clean = argvOrRefusal(preset(driver), "/srv/fw/plain.elf", t, dir.path(), &error);
      std::replace(clean.begin(), clean.end(), std::string("/srv/fw/plain.elf"), h.path);
      REQUIRE(argv == clean);
    }
  }
}

TEST_CASE("values that a tool would parse as options or separators are refused") {
  TempDir dir;
  FlashTarget t{"nucleo-1", "066DFF535155", "/dev/ttyACM3"};
  std::string error;
  REQUIRE(argvOrRefusal(preset("pyocd"), "--erase=chip", t, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"pyocd\": the image path starts with '-', which the tool would read as an option");
  REQUIRE(argvOrRefusal(preset("esptool"), "@/etc/args", t, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"esptool\": the image path starts with '@', which the tool would read as an option");
  REQUIRE(argvOrRefusal(preset("esptool"), "/x.bin", {"b", "", "rfc2217://evil:4000"}, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"esptool\": the serial port \"rfc2217://evil:4000\" is not an absolute device path");
  REQUIRE(argvOrRefusal(preset("dfu-util"), "/x.bin", {"b", "A,B", ""}, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"dfu-util\": the USB serial contains ',', which dfu-util --serial reads as a separator");
  REQUIRE(argvOrRefusal(preset("nrfjprog"), "/x.hex", {"b", "--recover", ""}, dir.path(), &error).empty());
  REQUIRE(error == "flash driver \"nrfjprog\": the USB serial starts with '-', which the tool would read as an option");
}

TEST_CASE("a refused value fails the flash before any tool runs") {
  TempDir dir;
  hwfarm::config::FlashConfig c = preset("command");
  std::string marker = dir.file("ran");
  c.argv = {"/bin/sh", "-c", "touch " + marker, "sh", "{image}"};
  c.timeout_s = 5;
  auto r = flash(c, "/srv/fw/a\nb.elf", {"b", "", ""}, dir.file("log"), dir.path());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.is(hwfarm::Code::invalid_argument));
  REQUIRE(r.isInfrastructure());
  REQUIRE(r.message() == "flash driver \"command\": the image path contains the control character 0x0a at byte 9");
  REQUIRE_FALSE(std::ifstream(marker).good());
}

TEST_CASE("a command flasher gets a hostile file's path intact") {
  // Given a real file whose name holds every hostile character but a newline,
  TempDir dir;
  std::string name = dir.file("x} [y] $(touch owned) 'q' \"d\".bin");
  { std::ofstream(name) << "firmware bytes"; }
  hwfarm::config::FlashConfig c = preset("command");
  c.argv = {"/bin/cp", "--", "{image}", dir.file("copied")};
  c.timeout_s = 5;
  // the flasher opens exactly that file, and nothing ran the substitution.
  auto r = flash(c, name, {"b", "", ""}, dir.file("log"), dir.path());
  REQUIRE(r.ok());
  REQUIRE(readFile(dir.file("copied")) == "firmware bytes");
  REQUIRE_FALSE(std::ifstream(dir.file("owned")).good());
}
