// Flashing a board: the preset's (or the operator's) argv, run by the tool
// runner. Every preset passes the board's USB serial so the right probe is
// used when several identical boards are attached.
#pragma once

#include <string>
#include <vector>

#include "config/fleet_config.h"
#include "drivers/tool_runner.h"

namespace hwfarm::drivers {

// What a flasher needs to know about the board it writes.
struct FlashTarget {
  std::string board;       // board name
  std::string usb_serial;  // may be empty
  std::string serial_port; // resolved console path, may be empty
};

// The argv that flashes `image` onto `target` with `config`. `scratch` is a
// directory for helper files (J-Link command files). Pure except that the
// jlink preset writes its command file there.
std::vector<std::string> flashArgv(const config::FlashConfig& config, const std::string& image,
                                   const FlashTarget& target, const std::string& scratch);

// Runs the flasher; the result is an infrastructure failure unless ok().
ToolResult flash(const config::FlashConfig& config, const std::string& image, const FlashTarget& target,
                 const std::string& log_path, const std::string& scratch);

} // namespace hwfarm::drivers
