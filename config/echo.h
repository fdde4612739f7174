// Text from outside (config values, request fields, URLs) quoted back in
// error messages, the log and JSON answers: bounded and printable.
//
// A value is echoed with C-style escapes: `\"`, `\\`, `\n`, `\r`, `\t` and
// `\xNN` for every other control character (U+0000-U+001F, U+007F) and for
// every byte that is not part of valid UTF-8. Valid UTF-8 passes unchanged.
// A value longer than kMaxEchoBytes is cut at a character boundary and ends
// in `…` with its full length: `"aaaa…" (20971520 bytes)`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/shown_text.h"

namespace hwfarm::config {

// How many bytes of a value an error message repeats.
inline constexpr size_t kMaxEchoBytes = 128;

// `value` escaped and bounded as above, without quotes; a cut value ends in
// `… (N bytes)`.
std::string echo(std::string_view value, size_t max_bytes = kMaxEchoBytes);

// `"value"` escaped and bounded as above; a cut value reads `"aaa…" (N bytes)`.
std::string quoteForMessage(std::string_view value, size_t max_bytes = kMaxEchoBytes);

// Length of the valid UTF-8 sequence at the start of `s` (common/shown_text.h).
using hwfarm::utf8SequenceLength;

bool isValidUtf8(std::string_view s);

// The first control character (U+0000-U+001F or U+007F) in `s`, as its
// offset; std::string_view::npos when there is none.
size_t findControlCharacter(std::string_view s);

} // namespace hwfarm::config
