// Texts the health and SLA policy put into reasons and warnings: times and
// durations in the forms operators read in `hwfarmctl sla`, the 409 refusal
// of a lease and the logs. Pure: times are arguments (unix ms).
#pragma once

#include <cstdint>
#include <string>

namespace hwfarm::health {

// "2026-12-01T03:12Z": UTC, to the minute (seconds dropped, not rounded).
std::string formatUtcMinute(int64_t unix_ms);

// A time left, for warnings: "3 h 12 m", "45 m", "20 s", "0 s".
// Minutes and seconds are cut, not rounded, so a countdown never shows
// more time than is left. Negative durations print as "0 s".
std::string formatCountdown(int64_t ms);

// A span, for reasons: "24h", "1h30m", "45m", "20s". Same cutting.
std::string formatSpan(int64_t ms);

// "tier 2", or "suspended" for tier 4 (demoted below tier 3: manual
// requests only, lease::tierServes).
std::string tierName(int tier);

} // namespace hwfarm::health
