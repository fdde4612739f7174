// <state_dir>/sla.json: the tier SLA policy's state (health::SlaState) and
// who pinned the tier, as the SLA service saves it after every change and
// reads it back at start-up (docs/sla.md "Wiring"). Pure text in, text out;
// the service does the file I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/core/health/sla_policy.h"

namespace hwfarm {

// Who pinned the effective tier, and why ("config" for sla.pin_tier).
struct SlaPin {
  int tier = 0;
  std::string by;
  std::string reason;
  int64_t at_ms = 0;
};

struct SlaFile {
  health::SlaState state;
  std::optional<SlaPin> pin; // set exactly when state.pinned is
};

// The file's text: one JSON object, "version": 1.
std::string encodeSlaFile(const SlaFile& file);

// Parses what encodeSlaFile wrote. invalid_argument naming the first bad
// field (not JSON, an unknown version, a tier outside 1..4, a pin outside
// 1..3, a pin without its record, an unknown scope or transition kind, more
// than kMaxSlaItems runs, incidents or transitions).
Result<SlaFile> decodeSlaFile(std::string_view text);

inline constexpr size_t kMaxSlaItems = 1'000'000;

} // namespace hwfarm
