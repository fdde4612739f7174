#include "daemon/app/sd_notify.h"

#include <systemd/sd-daemon.h>

#include <ctime>

namespace hwfarm::systemd {
namespace {

void send(const std::string& state) { sd_notify(0, state.c_str()); }

uint64_t monotonicUsec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

} // namespace

void ready(const std::string& text) { send("READY=1\nSTATUS=" + text); }

// MONOTONIC_USEC lets systemd >= 253 (Type=notify-reload) match the reload.
void reloading() { send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonicUsec())); }

void stopping() { send("STOPPING=1"); }

void watchdog() { send("WATCHDOG=1"); }

std::optional<std::chrono::microseconds> watchdogPingInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec / 2);
}

} // namespace hwfarm::systemd
