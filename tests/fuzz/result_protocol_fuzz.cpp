// Fuzz target: the result-protocol parser (daemon/core/run/protocol.h) and
// the one console line reader it reads with (common/console_line.h), on
// console bytes from an untrusted firmware, versions 1 and 2. Invariants: it
// never crashes or grows past its limits; how the bytes are split into
// pieces changes nothing (the first byte picks a split point); reading the
// bytes or the lines a serial port's reader cut from them gives one result;
// the line reader loses nothing but the CRs before a line end, and no piece
// passes its limit.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/console_line.h"
#include "daemon/core/run/protocol.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

namespace {

constexpr size_t kMaxLine = 256; // small, so cut lines are reached

std::string withoutCr(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '\r') out += c;
  return out;
}

// The line reader alone: pieces within the limit, the same in any chunking,
// and every byte but a CR kept.
void checkLines(std::string_view text, size_t at) {
  std::vector<std::string> whole, split;
  std::string rebuilt;
  LineReader a(kMaxLine), b(kMaxLine);
  auto intoWhole = [&](const ConsoleLine& l) {
    FUZZ_CHECK(l.text.size() <= kMaxLine, "a piece of %zu bytes", l.text.size());
    whole.push_back(std::string(l.text) + char('0' + static_cast<int>(l.end)) + (l.continued ? "c" : ""));
    rebuilt += l.text;
    if (l.end == LineEnd::newline) rebuilt += '\n';
  };
  auto intoSplit = [&](const ConsoleLine& l) {
    split.push_back(std::string(l.text) + char('0' + static_cast<int>(l.end)) + (l.continued ? "c" : ""));
  };
  a.feed(text, intoWhole);
  a.finish(intoWhole);
  b.feed(text.substr(0, at), intoSplit);
  for (size_t i = at; i < text.size(); i += 5) b.feed(text.substr(i, 5), intoSplit);
  b.finish(intoSplit);
  FUZZ_CHECK(whole == split, "chunking changed the lines");
  FUZZ_CHECK(withoutCr(rebuilt) == withoutCr(text), "the lines lost bytes");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t at = text.empty() ? 0 : data[0] % (text.size() + 1);
  checkLines(text, at);
  run::ParseOptions options;
  options.max_line_bytes = kMaxLine;
  options.max_values = 4096;
  options.max_cases = 16;
  options.max_outputs = 16;
  options.max_problems = 32;
  run::Parser whole(options);
  whole.feed(text);
  whole.finish();
  run::Parser split(options);
  split.feed(text.substr(0, at));
  for (size_t i = at; i < text.size(); i += 7) split.feed(text.substr(i, 7));
  split.finish();
  // A serial port's reader cuts the lines, the parser takes them.
  run::Parser lines(options);
  LineReader reader(kMaxLine);
  reader.feed(text, [&](const ConsoleLine& l) { lines.line(l); });
  reader.finish([&](const ConsoleLine& l) { lines.line(l); });
  lines.finish();
  const run::ParseResult& a = whole.result();
  for (const run::ParseResult* b : {&split.result(), &lines.result()}) {
    FUZZ_CHECK(a.lines == b->lines && a.records == b->records && a.cut_lines == b->cut_lines &&
                   a.noise_bytes == b->noise_bytes && a.intact_records == b->intact_records,
               "chunking changed lines");
    FUZZ_CHECK(a.cases.size() == b->cases.size() && a.outputs.size() == b->outputs.size() &&
                   a.problems.size() == b->problems.size() && a.ended == b->ended && a.version == b->version,
               "chunking changed the result");
    for (size_t i = 0; i < a.problems.size(); ++i)
      FUZZ_CHECK(a.problems[i].message == b->problems[i].message && a.problems[i].kind == b->problems[i].kind,
                 "chunking changed problem %zu", i);
  }
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
  FUZZ_CHECK(a.noise_lines + a.records == a.lines, "%zu noise + %zu records of %zu lines", a.noise_lines, a.records,
             a.lines);
  FUZZ_CHECK(a.intact_records + a.records_after_end <= a.records, "intact records");
  FUZZ_CHECK(a.damaged_lines <= a.lines && a.test_records <= a.intact_records, "damaged or test records");
  FUZZ_CHECK(!(a.countVerified() && a.countMismatch()), "a count both verified and mismatched");
  FUZZ_CHECK(a.countMismatch() == a.hasProblem(run::ProblemKind::count_mismatch) || a.problems_dropped > 0,
             "a count mismatch without its problem");
  FUZZ_CHECK(a.version == 1 || a.version == 2, "version %d", a.version);
  FUZZ_CHECK(!a.end_status || a.ended, "a status without END");
  return 0;
}
