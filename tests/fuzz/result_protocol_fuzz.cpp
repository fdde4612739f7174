// Fuzz target: the result-protocol parser (daemon/core/run/protocol.h), on
// console bytes from an untrusted firmware. Invariants: it never crashes or
// grows past its limits, and how the bytes are split into pieces changes
// nothing (the first byte picks a split point).
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "daemon/core/run/protocol.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  run::ParseOptions options;
  options.max_line_bytes = 256; // small, so cut lines are reached
  options.max_values = 4096;
  options.max_cases = 16;
  options.max_outputs = 16;
  options.max_problems = 32;
  run::Parser whole(options);
  whole.feed(text);
  whole.finish();
  run::Parser split(options);
  size_t at = text.empty() ? 0 : data[0] % (text.size() + 1);
  split.feed(text.substr(0, at));
  for (size_t i = at; i < text.size(); i += 7) split.feed(text.substr(i, 7));
  split.finish();
  const run::ParseResult& a = whole.result();
  const run::ParseResult& b = split.result();
  FUZZ_CHECK(a.lines == b.lines && a.records == b.records && a.cut_lines == b.cut_lines, "chunking changed lines");
  FUZZ_CHECK(a.cases.size() == b.cases.size() && a.outputs.size() == b.outputs.size() &&
                 a.problems.size() == b.problems.size(),
             "chunking changed the result");
  for (size_t i = 0; i < a.problems.size(); ++i)
    FUZZ_CHECK(a.problems[i].message == b.problems[i].message, "chunking changed problem %zu", i);
  FUZZ_CHECK(a.cases.size() <= options.max_cases, "%zu cases", a.cases.size());
  FUZZ_CHECK(a.outputs.size() <= options.max_outputs, "%zu outputs", a.outputs.size());
  FUZZ_CHECK(a.problems.size() <= options.max_problems, "%zu problems", a.problems.size());
  size_t values = 0;
  std::set<std::string> keys;
  for (const auto& o : a.outputs) {
    FUZZ_CHECK(o.values.size() <= o.count, "output %s holds %zu of %zu", o.key().c_str(), o.values.size(), o.count);
    FUZZ_CHECK(keys.insert(o.key()).second, "output %s twice", o.key().c_str());
    values += o.values.size();
  }
  FUZZ_CHECK(values <= options.max_values, "%zu values kept", values);
  std::set<std::string> names;
  for (const auto& c : a.cases) {
    FUZZ_CHECK(names.insert(c.name).second, "case %s twice", c.name.c_str());
    FUZZ_CHECK(c.line >= 1 && c.line <= a.lines, "case line %zu of %zu", c.line, a.lines);
  }
  FUZZ_CHECK(a.corrupt_records <= a.checked_records && a.checked_records <= a.records, "record counts");
  return 0;
}
