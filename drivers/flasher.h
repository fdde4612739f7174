// Flashing a board: the preset's (or the operator's) argv, run by the tool
// runner. Every preset passes the board's USB serial so the right probe is
// used when several identical boards are attached.
//
// Values (image path, USB serial, serial port) never pass through a shell.
// Where a value enters a tool's own command language it is quoted for that
// language or refused: OpenOCD's Tcl (`adapter serial`, `program`), the
// J-Link command file, dfu-util's "product,dfu" serial syntax, and option
// parsing (a value that would read as an option). Control characters
// (newline, CR, ...) are refused everywhere.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
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
// jlink preset writes its command file there. A value the preset cannot
// pass safely (or a command file that cannot be written) is refused:
// Code::invalid_argument, "flash driver \"NAME\": WHY".
Result<std::vector<std::string>> flashArgv(const config::FlashConfig& config, const std::string& image,
                                           const FlashTarget& target, const std::string& scratch);

// One Tcl word that evaluates to `value` (backslash-escaped where needed);
// Code::invalid_argument for a value holding control characters.
Result<std::string> tclWord(const std::string& value);

// Runs the flasher. A failure is an infrastructure Status
// (ToolResult::toStatus: the exit status or signal and the output tail as
// evidence); a value the preset refuses is Code::invalid_argument, and no
// tool runs.
Status flash(const config::FlashConfig& config, const std::string& image, const FlashTarget& target,
                 const std::string& log_path, const std::string& scratch);

} // namespace hwfarm::drivers
