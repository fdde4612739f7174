#include "daemon/core/upload/policy.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace hwfarm::upload {

int64_t retryDelayMs(const Backoff& b, int failures, double jitter) {
  int64_t step = std::max<int64_t>(b.initial_ms, 1);
  for (int i = 1; i < failures && step < b.max_ms; ++i) step *= 2;
  step = std::min(step, std::max<int64_t>(b.max_ms, 1));
  jitter = std::clamp(jitter, 0.0, 1.0);
  return step / 2 + static_cast<int64_t>(static_cast<double>(step - step / 2) * jitter);
}

FailureKind classify(int http_status, std::string_view s3_code) {
  if (http_status == 0 || http_status >= 500 || http_status == 408 || http_status == 429) return FailureKind::transient;
  // S3's own throttling and clock-skew answers come as 4xx too; the clock
  // may be corrected (NTP), so they are worth another try.
  if (s3_code == "RequestTimeTooSkewed" || s3_code == "SlowDown" || s3_code == "RequestTimeout")
    return FailureKind::transient;
  return FailureKind::permanent;
}

namespace {

std::string join(std::string_view prefix, std::string_view rest) {
  if (prefix.empty()) return std::string(rest);
  return std::string(prefix) + "/" + std::string(rest);
}

} // namespace

std::string runKey(std::string_view prefix, std::string_view agent, std::string_view day, std::string_view commit,
                   std::string_view run_id) {
  std::string c = commit.empty() ? "unknown" : std::string(commit);
  return join(prefix, std::string(agent) + "/" + std::string(day) + "/" + c + "/" + std::string(run_id));
}

std::string indexKey(std::string_view prefix, std::string_view agent, std::string_view day) {
  return join(prefix, std::string(agent) + "/" + std::string(day) + "/index.json");
}

std::string utcDay(int64_t unix_ms) { return utcTime(unix_ms).substr(0, 10); }

std::string utcTime(int64_t unix_ms) {
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ms % 1000));
  return out;
}

std::string encodeKey(std::string_view key) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size() * 3);
  for (unsigned char c : key) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                 c == '.' || c == '_' || c == '~' || c == '/';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

} // namespace hwfarm::upload
