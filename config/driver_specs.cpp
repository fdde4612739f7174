#include "config/driver_specs.h"

#include <algorithm>

#include "config/echo.h"

namespace hwfarm::config {

const std::vector<std::string>& boardDriverNames() {
  static const std::vector<std::string> names{"usb", "qemu"};
  return names;
}

const std::vector<FlashDriverSpec>& flashDrivers() {
  using K = OptionKind;
  static const std::vector<FlashDriverSpec> drivers{
      {"openocd", "openocd",
       {{"interface", K::text, false, "interface/stlink.cfg", "adapter config script"},
        {"target", K::text, true, nullptr, "target config script, e.g. target/stm32f4x.cfg"},
        {"adapter_speed_khz", K::integer, false, nullptr, "SWD/JTAG clock"}}},
      {"pyocd", "pyocd",
       {{"target", K::text, true, nullptr, "pyOCD target name, e.g. stm32f429zi"},
        {"frequency_hz", K::integer, false, nullptr, "SWD clock"}}},
      {"dfu-util", "dfu-util",
       {{"alt", K::integer, false, "0", "DFU alternate setting"},
        {"address", K::address, false, "0x08000000", "load address"}}},
      {"st-flash", "st-flash", {{"address", K::address, false, "0x08000000", "load address"}}},
      {"esptool", "esptool",
       {{"chip", K::text, false, "auto", "esp32, esp32s3, ..."},
        {"address", K::address, false, "0x0", "load address"},
        {"baud", K::integer, false, "460800", "flashing baud rate"}}},
      {"jlink", "JLinkExe",
       {{"device", K::text, true, nullptr, "J-Link device name, e.g. STM32F429ZI"},
        {"interface", K::text, false, "SWD", "SWD or JTAG"},
        {"speed_khz", K::integer, false, "4000", "interface clock"},
        {"address", K::address, false, "0x0", "load address for .bin images"}}},
      {"nrfjprog", "nrfjprog", {{"family", K::text, false, "NRF52", "NRF51, NRF52, NRF53, NRF91"}}},
      {"command", "", {}},
  };
  return drivers;
}

const FlashDriverSpec* findFlashDriver(std::string_view name) {
  for (const auto& d : flashDrivers())
    if (name == d.name) return &d;
  return nullptr;
}

std::vector<std::string> flashDriverNames() {
  std::vector<std::string> names;
  for (const auto& d : flashDrivers()) names.emplace_back(d.name);
  return names;
}

const std::vector<int64_t>& standardBaudRates() {
  static const std::vector<int64_t> rates{50,     75,     110,    134,     150,     200,     300,     600,
                                          1200,   1800,   2400,   4800,    9600,    19200,   38400,   57600,
                                          115200, 230400, 460800, 500000,  576000,  921600,  1000000, 1152000,
                                          1500000, 2000000, 2500000, 3000000, 3500000, 4000000};
  return rates;
}

const std::vector<std::string>& powerDriverNames() {
  static const std::vector<std::string> names{"none", "uhubctl", "command"};
  return names;
}

const std::vector<std::string>& flashPlaceholders() {
  static const std::vector<std::string> names{"image", "usb_serial", "serial_port", "board"};
  return names;
}

const std::vector<std::string>& powerPlaceholders() {
  static const std::vector<std::string> names{"usb_serial", "serial_port", "board"};
  return names;
}

std::string checkTemplate(std::string_view arg, const std::vector<std::string>& allowed) {
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] == '}') return "unbalanced \"}\" in " + quoteForMessage(arg);
    if (arg[i] != '{') continue;
    size_t close = arg.find('}', i);
    if (close == std::string_view::npos) return "unbalanced \"{\" in " + quoteForMessage(arg);
    std::string name(arg.substr(i + 1, close - i - 1));
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string known;
      for (const auto& a : allowed) known += (known.empty() ? "{" : ", {") + a + "}";
      return "unknown placeholder {" + echo(name) + "} (known: " + known + ")";
    }
    i = close;
  }
  return {};
}

std::string expandTemplate(std::string_view arg, const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] != '{') {
      out += arg[i];
      continue;
    }
    size_t close = arg.find('}', i);
    out += values.at(std::string(arg.substr(i + 1, close - i - 1)));
    i = close;
  }
  return out;
}

} // namespace hwfarm::config
