// The result protocol a firmware speaks on its console (docs/protocol.md),
// parsed as the console streams in: pure (bytes or lines in, records out),
// any chunking, bounded, never trusting the firmware.
//
//   HWFARM BEGIN [v=2] suite=<name>
//   HWFARM TEST <case> PASS|FAIL|SKIP [message]
//   HWFARM OUTPUT <case>.<output> <dtype> <count> [@<offset>] <values...>
//   HWFARM END [status=<n>] [records=<n>]
//
// Version 1 (a BEGIN without v=2): a record may end in " *<crc>" (CRC-32 of
// every byte before " *", eight hex digits); once a record of the run
// carried a matching one, every suffix is a CRC, and before that a TEST
// record's suffix that does not match is the end of its message. Version 2
// (BEGIN v=2): every record ends in its CRC suffix, always the last field,
// and END says how many records came before it (records=<n>), so a record
// lost on the way (a flipped bit in its tag, text before it, lost bytes)
// shows as a count mismatch.
//
// Lines come from the one console line reader (common/console_line.h): only
// a whole line (not cut at the length limit, not cut by the console's end)
// is read as a record, and END is what isEndRecord() says. Every other line
// is noise, counted; a line that looks like a damaged record (a near-miss
// tag, a record after other text on its line) is a problem.
//
// Problems carry a kind, for the verdict rules, and a failure class until
// they class it by the reference: a record whose CRC proves it damaged is
// infrastructure (serial corruption), everything else is the firmware's
// (test), a count mismatch included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/console_line.h"
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

// What kind of thing went wrong, for rules that class problems by evidence.
enum class ProblemKind {
  malformed,      // a record against the grammar: before BEGIN, a bad field, a second TEST of a case, ...
  crc_mismatch,   // the record's CRC does not match its bytes: not used
  crc_missing,    // a version-2 record without its CRC suffix (or with a damaged one): not used
  damaged_line,   // a line that looks like a record damaged on the way: a near-miss tag
                  // ("HWFARO TEST"), or a record after other text on its line ("xx HWFARM TEST")
  cut_line,       // a record line longer than the limit, or one the console ended inside of
  count_mismatch, // END's records=<n> is not the number of records that arrived intact
  second_begin,   // a BEGIN after the first
  after_end,      // a record after END
  incomplete,     // an output still missing values when the console ended
  over_limit,     // more cases, outputs or values than the parser keeps
  unsupported,    // a protocol version this parser does not read
};
std::string_view problemKindName(ProblemKind k); // "count_mismatch", ...

// Something wrong in what the firmware printed (or in how it arrived).
struct Problem {
  size_t line = 0;
  std::string case_name;      // empty: not tied to a case (suite level)
  FailureClass failure = FailureClass::test;
  std::string message;
  ProblemKind kind = ProblemKind::malformed;
};

struct ParseOptions {
  size_t max_line_bytes = kMaxLineBytes; // longer lines are cut (feed() only; line() takes the caller's pieces)
  size_t max_values = 16u << 20;    // over all outputs (8 bytes each in memory)
  size_t max_cases = 10000;
  size_t max_outputs = 10000;
  size_t max_problems = 1000;       // more are only counted
  size_t max_name_bytes = 256;      // suite, case and output names
};

// What a console said. Counts are of the whole console; "before END" means
// up to the first END record.
struct ParseResult {
  int version = 1;                  // 2 once a valid BEGIN said v=2
  std::optional<std::string> suite; // set by the first valid BEGIN
  bool ended = false;               // an END record was seen (isEndRecord), even a corrupt one
  std::optional<int> end_status;    // END's status= (absent: END without a status, or unreadable)
  size_t end_line = 0;
  std::vector<TestCase> cases;      // in the order of their TEST records
  std::vector<Output> outputs;      // in the order of their first records
  std::vector<Problem> problems;
  size_t problems_dropped = 0;      // beyond max_problems

  size_t lines = 0;                 // lines seen (pieces of a long line count once; a cut last one counts)
  size_t records = 0;               // lines starting with "HWFARM " (after serial noise)
  size_t checked_records = 0;       // records whose CRC suffix was checked
  size_t corrupt_records = 0;       // CRC mismatches
  size_t missing_crc_records = 0;   // version-2 records without a CRC suffix
  size_t cut_lines = 0;             // lines longer than max_line_bytes
  bool last_line_cut = false;       // the console ended inside a line (it was not read as a record)
  size_t noise_lines = 0;           // lines that are no record: boot messages, logs, garbage
  size_t noise_bytes = 0;           // their bytes (the pieces of long ones included)
  size_t damaged_lines = 0;         // lines that look like damaged records (each also a problem)
  size_t begins = 0;                // BEGIN records before END, valid or not: noise alone has none
  size_t second_begin_line = 0;     // the line of a BEGIN after the first; 0: none
  size_t test_records = 0;          // TEST records before END that arrived intact, valid or not
  size_t intact_records = 0;        // records before END that arrived whole and CRC-clean (END excluded)
  std::optional<size_t> declared_records; // END's records=<n>
  size_t records_after_end = 0;     // records after END (each also a problem)
  size_t first_after_end_line = 0;  // 0: none

  const TestCase* findCase(std::string_view name) const;
  const Output* findOutput(std::string_view case_name, std::string_view name) const;
  // Problems of the infrastructure class (a record whose CRC proves it damaged).
  bool hasInfrastructureProblem() const;
  bool hasProblem(ProblemKind kind) const;
  // A TEST record was read: the run ran at least one case.
  bool hasCases() const { return !cases.empty(); }
  // END counted its records and the count matched: no record was lost.
  bool countVerified() const { return declared_records && *declared_records == intact_records; }
  // END counted its records and the count did not match: a record was lost
  // (or the firmware miscounted).
  bool countMismatch() const { return declared_records && *declared_records != intact_records; }
};

// CRC-32 (IEEE 802.3, as zlib's crc32()) of `data`.
uint32_t crc32(std::string_view data);

class Parser {
 public:
  explicit Parser(ParseOptions options = {});

  // Takes the next bytes of the console, in any pieces (split into lines by
  // a LineReader of max_line_bytes).
  void feed(std::string_view bytes);
  // Takes the next line of a console its caller read with its own
  // LineReader (a board's serial port). Use feed() or line(), not both.
  void line(const ConsoleLine& line);
  // The console ended: a line fed without its end is a cut line (never a
  // record), and outputs still missing values become problems. feed() and
  // line() after finish() are ignored.
  void finish();

  // END was seen: the caller may stop the target.
  bool ended() const { return result_.ended; }
  const ParseResult& result() const { return result_; }
  ParseResult take() && { return std::move(result_); }

 private:
  void wholeRecord(std::string_view text);
  bool checkCrc(std::string_view keyword, std::string_view& body, bool v2_begin);
  void noise(std::string_view text, bool first_piece);
  void damaged(std::string_view text, size_t from, const char* how, size_t line_offset = 0);
  void countDamaged();
  void begin(std::string_view rest);
  void test(std::string_view rest);
  void output(std::string_view rest);
  void end(std::string_view rest);
  void problem(std::string case_name, std::string message, ProblemKind kind = ProblemKind::malformed,
               FailureClass failure = FailureClass::test);
  bool validName(std::string_view name) const;

  ParseOptions options_;
  ParseResult result_;
  LineReader reader_;
  bool crc_seen_ = false;  // a record of this run carried a matching CRC
  bool in_noise_ = false;  // the line whose pieces arrive is noise
  size_t piece_at_ = 0;    // bytes of the current line before its next piece
  bool finished_ = false;
  size_t line_no_ = 0;     // of the line being parsed
  size_t damaged_line_ = 0; // the last line counted in damaged_lines
  size_t values_ = 0;      // over all outputs
  std::unordered_map<std::string, size_t> case_index_;
  std::unordered_map<std::string, size_t> output_index_; // by key()
};

} // namespace hwfarm::run
