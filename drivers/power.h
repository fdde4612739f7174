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

// cycle_off is the first half of a cycle that its caller completes with
// an on: off, then the switch's off time (power.off_s). A run boots a
// switched board so, listening to its console only from the on: what the
// board printed until it was off (a boot of the flasher's own reset) is
// not the run's.
enum class PowerAction { on, off, cycle, cycle_off };
const char* toString(PowerAction action);
// Whether `action` leaves the board off: off and cycle_off.
inline bool powersOff(PowerAction action) { return action == PowerAction::off || action == PowerAction::cycle_off; }

// The argv for `action`, or several for a cycle without its own command
// (off, then on after off_s). Empty: nothing to run (driver "none").
std::vector<std::vector<std::string>> powerArgv(const config::PowerConfig& config, PowerAction action,
                                                const FlashTarget& target);

Status power(const config::PowerConfig& config, PowerAction action, const FlashTarget& target,
             const std::string& log_path);

} // namespace hwfarm::drivers
