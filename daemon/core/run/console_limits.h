// How much of one console hwfarmd keeps (docs/runs.md, "Limits"): enough
// for the largest record stream the protocol allows (ParseOptions: 16 Mi
// values), so a valid output is never cut. A console that passes it printed
// more than any valid run can: it is cut, and the cut is a verdict of its
// own (report.h), never read as the console closing.
#pragma once

#include <cstddef>

#include "daemon/core/run/protocol.h"

namespace hwfarm::run {

// The longest value text and its separator: "-1.17549435e-38 " (f32; i32's
// "-2147483648 " and f32x's eight hex digits are shorter).
inline constexpr size_t kMaxValueTextBytes = 16;
// A record line of max_line_bytes carries at least this many bytes of
// values after its tag, names (max_name_bytes each), dtype, count, offset
// and CRC suffix.
inline constexpr size_t kMinValueBytesPerLine = ParseOptions{}.max_line_bytes - 2 * ParseOptions{}.max_name_bytes - 96;
// The largest valid stream: its values in lines, a TEST line per case,
// and 64 MiB of other output (boot messages, logs), in MiB.
inline constexpr size_t kMaxConsoleMiB =
    (ParseOptions{}.max_values * kMaxValueTextBytes / kMinValueBytesPerLine * ParseOptions{}.max_line_bytes +
     ParseOptions{}.max_cases * ParseOptions{}.max_line_bytes) / (size_t{1} << 20) + 64;
inline constexpr size_t kMaxConsoleBytes = kMaxConsoleMiB << 20;

} // namespace hwfarm::run
