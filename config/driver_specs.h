// The drivers a board's `flash`, `power` and `driver` keys may name, with the
// options each accepts. The config loader validates against these tables and
// drivers/ builds argv from them, so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hwfarm::config {

enum class OptionKind { text, integer, address }; // address: "0x08000000" or an integer

struct OptionSpec {
  const char* key;
  OptionKind kind;
  bool required;
  const char* default_value; // nullptr: none
  const char* help;
};

struct FlashDriverSpec {
  const char* name;
  const char* tool; // default executable
  std::vector<OptionSpec> options;
};

// Board drivers: how hwfarmd reaches the board.
const std::vector<std::string>& boardDriverNames(); // usb, qemu
// Flash presets plus "command".
const std::vector<FlashDriverSpec>& flashDrivers();
const FlashDriverSpec* findFlashDriver(std::string_view name);
std::vector<std::string> flashDriverNames();
const std::vector<std::string>& powerDriverNames(); // none, uhubctl, command
// The serial rates Linux termios can set (B50 ... B4000000), ascending.
const std::vector<int64_t>& standardBaudRates();

// Placeholders an argv template may use.
const std::vector<std::string>& flashPlaceholders(); // image, usb_serial, serial_port, board
const std::vector<std::string>& powerPlaceholders(); // usb_serial, serial_port, board

// The first `{name}` in `arg` that is not in `allowed`, or a message about an
// unbalanced brace; empty when the template is valid.
std::string checkTemplate(std::string_view arg, const std::vector<std::string>& allowed);

// Replaces each `{name}` by values.at(name). REQUIRES: checkTemplate passed.
std::string expandTemplate(std::string_view arg, const std::map<std::string, std::string>& values);

} // namespace hwfarm::config
