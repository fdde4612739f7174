// The result protocol a firmware speaks on its console (docs/protocol.md),
// parsed as the console streams in: pure (bytes in, records out), any
// chunking, never trusting the firmware.
//
//   HWFARM BEGIN suite=<name>
//   HWFARM TEST <case> PASS|FAIL|SKIP [message]
//   HWFARM OUTPUT <case>.<output> <dtype> <count> [@<offset>] <values...>
//   HWFARM END status=<n>
//
// A record may end in " *<crc>" (CRC-32 of the bytes before " *", eight hex
// digits): then it is checked, and a record that fails is corrupt (serial
// corruption: an infrastructure problem) and never used. Every other line
// (boot messages, noise, binary garbage) is ignored; CRLF is fine. A
// malformed record is a problem of its case (a test failure) with its line
// number. Everything the parser keeps is bounded by ParseOptions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "daemon/core/run/dtype.h"

namespace hwfarm::run {

// An OUTPUT record's dtype. f32x on the wire is f32 written as its bit
// pattern (eight hex digits), for firmware without printf float support.
std::optional<Dtype> dtypeFromString(std::string_view s); // "f32x" is f32

enum class CaseResult { pass, fail, skip };
std::string_view caseResultName(CaseResult r);

struct TestCase {
  std::string name;
  CaseResult result = CaseResult::pass;
  std::string message; // the rest of the TEST line, for humans
  size_t line = 0;
};

struct Output {
  std::string case_name;
  std::string name;
  Dtype dtype = Dtype::f32;
  size_t count = 0;           // declared number of values
  std::vector<double> values; // received so far, exact (f32 and every integer type fit a double)
  size_t line = 0;            // of its first record
  bool refused = false;       // a piece was malformed: its values are dropped, never compared
  bool complete() const { return !refused && values.size() == count; }
  std::string key() const { return case_name + "." + name; }
};

// Something wrong in what the firmware printed.
struct Problem {
  size_t line = 0;
  std::string case_name;      // empty: not tied to a case (suite level)
  FailureClass failure = FailureClass::test;
  std::string message;
};

struct ParseOptions {
  size_t max_line_bytes = 4096;     // longer lines are cut and flagged
  size_t max_values = 16u << 20;    // over all outputs (8 bytes each in memory)
  size_t max_cases = 10000;
  size_t max_outputs = 10000;
  size_t max_problems = 1000;       // more are only counted
  size_t max_name_bytes = 256;      // suite, case and output names
};

struct ParseResult {
  std::optional<std::string> suite; // set by BEGIN
  bool ended = false;               // END seen
  std::optional<int> end_status;    // END's status= (absent: END without a status)
  size_t end_line = 0;
  std::vector<TestCase> cases;      // in the order of their TEST records
  std::vector<Output> outputs;      // in the order of their first records
  std::vector<Problem> problems;
  size_t problems_dropped = 0;      // beyond max_problems
  size_t lines = 0;                 // lines seen (a partial last one included, after finish())
  size_t records = 0;               // HWFARM lines
  size_t corrupt_records = 0;       // CRC mismatches
  size_t checked_records = 0;       // records that carried a CRC
  size_t cut_lines = 0;             // lines longer than max_line_bytes

  const TestCase* findCase(std::string_view name) const;
  const Output* findOutput(std::string_view case_name, std::string_view name) const;
  // Problems of the infrastructure class (CRC mismatches).
  bool hasInfrastructureProblem() const;
};

// CRC-32 (IEEE 802.3, as zlib's crc32()) of `data`.
uint32_t crc32(std::string_view data);

class Parser {
 public:
  explicit Parser(ParseOptions options = {});

  // Takes the next bytes of the console, in any pieces.
  void feed(std::string_view bytes);
  // The console ended: a partial last line is parsed, and outputs still
  // missing values become problems. feed() after finish() is ignored.
  void finish();

  // END was seen: the caller may stop the target.
  bool ended() const { return result_.ended; }
  const ParseResult& result() const { return result_; }
  ParseResult take() && { return std::move(result_); }

 private:
  void line(std::string_view text, bool cut);
  void record(std::string_view text);
  void begin(std::string_view rest);
  void test(std::string_view rest);
  void output(std::string_view rest);
  void end(std::string_view rest);
  void problem(std::string case_name, std::string message, FailureClass failure = FailureClass::test);
  bool validName(std::string_view name) const;

  ParseOptions options_;
  ParseResult result_;
  std::string partial_; // the line being received (at most max_line_bytes)
  bool cutting_ = false; // the current line passed max_line_bytes
  bool finished_ = false;
  size_t line_no_ = 0;   // of the line being parsed
  size_t values_ = 0;    // over all outputs
  std::unordered_map<std::string, size_t> case_index_;
  std::unordered_map<std::string, size_t> output_index_; // by key()
};

} // namespace hwfarm::run
