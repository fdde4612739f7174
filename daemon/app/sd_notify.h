// systemd service notifications (sd_notify(3)). Every call is a no-op when
// hwfarmd was not started by systemd ($NOTIFY_SOCKET unset).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace hwfarm::systemd {

void ready(const std::string& status);
void reloading();
void stopping();
void watchdog();

// Half the watchdog timeout if $WATCHDOG_USEC applies to this process.
std::optional<std::chrono::microseconds> watchdogPingInterval();

} // namespace hwfarm::systemd
