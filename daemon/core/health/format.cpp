#include "daemon/core/health/format.h"

#include <cstdio>

namespace hwfarm::health {
namespace {

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Days since 1970-01-01 to a civil date (H. Hinnant's civil_from_days).
void civilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = floorDiv(z, 146097);
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
}

} // namespace

std::string formatUtcMinute(int64_t unix_ms) {
  const int64_t minutes = floorDiv(unix_ms, kMinute);
  const int64_t days = floorDiv(minutes, 24 * 60);
  const int64_t in_day = minutes - days * 24 * 60;
  int64_t y = 0;
  unsigned m = 0, d = 0;
  civilFromDays(days, y, m, d);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lldZ", static_cast<long long>(y), m, d,
                static_cast<long long>(in_day / 60), static_cast<long long>(in_day % 60));
  return buf;
}

std::string formatCountdown(int64_t ms) {
  if (ms < kMinute) return std::to_string(ms < 0 ? 0 : ms / 1000) + " s";
  const int64_t h = ms / kHour, m = ms % kHour / kMinute;
  if (h == 0) return std::to_string(m) + " m";
  return std::to_string(h) + " h " + std::to_string(m) + " m";
}

std::string formatSpan(int64_t ms) {
  if (ms < kMinute) return std::to_string(ms < 0 ? 0 : ms / 1000) + "s";
  const int64_t h = ms / kHour, m = ms % kHour / kMinute;
  std::string out;
  if (h > 0) out += std::to_string(h) + "h";
  if (m > 0 || h == 0) out += std::to_string(m) + "m";
  return out;
}

std::string tierName(int tier) { return tier >= 4 ? "suspended" : "tier " + std::to_string(tier); }

} // namespace hwfarm::health
