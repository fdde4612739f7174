#include "drivers/flasher.h"

#include <fstream>

#include "config/driver_specs.h"

namespace hwfarm::drivers {

std::vector<std::string> flashArgv(const config::FlashConfig& c, const std::string& image,
                                   const FlashTarget& t, const std::string& scratch) {
  auto opt = [&](const char* key) {
    auto it = c.options.find(key);
    return it == c.options.end() ? std::string() : it->second;
  };
  std::map<std::string, std::string> values{
      {"image", image}, {"usb_serial", t.usb_serial}, {"serial_port", t.serial_port}, {"board", t.board}};
  std::vector<std::string> argv;
  if (c.driver == "command") {
    for (const auto& arg : c.argv) argv.push_back(config::expandTemplate(arg, values));
    return argv;
  }
  const config::FlashDriverSpec* spec = config::findFlashDriver(c.driver);
  argv.push_back(c.tool.value_or(spec ? spec->tool : c.driver));
  if (c.driver == "openocd") {
    argv.insert(argv.end(), {"-f", opt("interface")});
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"-c", "adapter serial " + t.usb_serial});
    if (!opt("adapter_speed_khz").empty()) argv.insert(argv.end(), {"-c", "adapter speed " + opt("adapter_speed_khz")});
    // Braces: the image path stays one Tcl word even with spaces in it.
    argv.insert(argv.end(), {"-f", opt("target"), "-c", "program {" + image + "} verify reset exit"});
  } else if (c.driver == "pyocd") {
    argv.insert(argv.end(), {"flash", "--target", opt("target")});
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--uid", t.usb_serial});
    if (!opt("frequency_hz").empty()) argv.insert(argv.end(), {"--frequency", opt("frequency_hz")});
    argv.push_back(image);
  } else if (c.driver == "dfu-util") {
    argv.insert(argv.end(), {"--alt", opt("alt")});
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--serial", t.usb_serial});
    argv.insert(argv.end(), {"--dfuse-address", opt("address") + ":leave", "--download", image});
  } else if (c.driver == "st-flash") {
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--serial", t.usb_serial});
    argv.insert(argv.end(), {"--reset", "write", image, opt("address")});
  } else if (c.driver == "esptool") {
    // esptool finds the board by its serial port, which the USB match resolved.
    argv.insert(argv.end(), {"--chip", opt("chip"), "--port", t.serial_port, "--baud", opt("baud"), "write_flash",
                             opt("address"), image});
  } else if (c.driver == "jlink") {
    std::string script = scratch + "/jlink-" + t.board + ".jlink";
    std::ofstream(script) << "loadfile " << image << " " << opt("address") << "\nr\ng\nexit\n";
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"-USB", t.usb_serial});
    argv.insert(argv.end(), {"-device", opt("device"), "-if", opt("interface"), "-speed", opt("speed_khz"),
                             "-autoconnect", "1", "-ExitOnError", "1", "-CommandFile", script});
  } else if (c.driver == "nrfjprog") {
    argv.insert(argv.end(), {"--family", opt("family")});
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--snr", t.usb_serial});
    argv.insert(argv.end(), {"--program", image, "--sectorerase", "--verify", "--reset"});
  }
  for (const auto& extra : c.extra_args) argv.push_back(config::expandTemplate(extra, values));
  return argv;
}

ToolResult flash(const config::FlashConfig& config, const std::string& image, const FlashTarget& target,
                 const std::string& log_path, const std::string& scratch) {
  ToolOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  options.log_path = log_path;
  return runTool(flashArgv(config, image, target, scratch), options);
}

} // namespace hwfarm::drivers
