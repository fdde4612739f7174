// Power switches: uhubctl (per-port USB power), an operator command, or none.
// Errors are infrastructure Status values with the tool's exit status or
// signal and its output tail as evidence (ToolResult::toStatus).
// Blocking: call off the event loop.
#pragma once

#include <string>

#include "config/fleet_config.h"
#include "drivers/flasher.h"
#include "common/status.h"

namespace hwfarm::drivers {

enum class PowerAction { on, off, cycle };
const char* toString(PowerAction action);

// The argv for `action`, or several for a cycle without its own command
// (off, then on after off_s). Empty: nothing to run (driver "none").
std::vector<std::vector<std::string>> powerArgv(const config::PowerConfig& config, PowerAction action,
                                                const FlashTarget& target);

Status power(const config::PowerConfig& config, PowerAction action, const FlashTarget& target,
             const std::string& log_path);

} // namespace hwfarm::drivers
