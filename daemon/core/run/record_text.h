// The text of one result record (docs/protocol.md): its fields, values,
// CRC suffix, and the signs of a record damaged on the way. Pure: the
// parser's helpers (daemon/core/run/protocol.cpp).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/console_line.h"
#include "daemon/core/run/dtype.h"

namespace hwfarm::run::text {

// Splits `text` at runs of spaces and tabs.
std::vector<std::string_view> fields(std::string_view text);
// The first field of `text` and what follows it (leading blanks dropped).
std::pair<std::string_view, std::string_view> firstField(std::string_view text);
// `text` shown in a message: at most 40 bytes, non-printable bytes as \xNN.
std::string shown(std::string_view text);
// The case a TEST or OUTPUT record (after "HWFARM ") is about, read without
// checking the rest: for the problem of a record that is not read.
std::string caseOf(std::string_view record);

// A decimal integer, an optional '+' first, nothing else.
template <typename T>
bool parseInteger(std::string_view s, T& out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}
bool isHex(std::string_view s);
// One value of an OUTPUT record of `dtype` (`hex_bits`: f32x, the bit
// pattern) into `out`; an error message on failure.
std::optional<std::string> parseValue(std::string_view s, Dtype dtype, bool hex_bits, double& out);

// The record's CRC suffix: " *" and eight hex digits, the last 10 bytes.
std::optional<uint32_t> crcSuffix(std::string_view body);
// How long the damaged tag at the start of `text` is ("HWFARO ", "HWFRM ",
// "HWFARMTEST"'s "HWFARM": one byte changed, lost or added), when a record
// keyword follows it; 0 when there is none.
size_t nearMissTag(std::string_view text);
// Where a record tag followed by a keyword starts in `text`, at or after
// `from`; npos when none does.
size_t embeddedRecord(std::string_view text, size_t from);

} // namespace hwfarm::run::text
