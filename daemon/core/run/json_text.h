// JSON text for the run's files, written without a JSON library (the core
// has none): numbers in their shortest round-trip form, strings escaped.
#pragma once

#include <string>
#include <string_view>

namespace hwfarm::run {

// A number as JSON: the shortest of %.15g..%.17g that reads back the same;
// NaN and infinities (which JSON has not) as null.
std::string jsonNumber(double v);

// A JSON string literal of `s`, quotes included. Valid UTF-8 stays; every
// other byte and every control character but tab, LF and CRLF becomes
// "\xNN" first (xmlSafe, report.h), so the result is always valid JSON.
std::string jsonString(std::string_view s);

} // namespace hwfarm::run
