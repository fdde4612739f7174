// The results a test harness wrote: JUnit XML as
// pytest writes it (--junitxml, both the xunit1 and xunit2 families, with
// <properties> and <system-out>) and as Jenkins' xunit plugin reads it, and
// Zephyr twister's twister.json. Read into one shape: suites of cases, each
// passed, failed, error or skipped, with its time, the message and type of
// its failure, error or skip, its detail (a traceback) and output.
//
// Bounded for untrusted input: the file's size, the nesting depth, the
// cases read (counts stay exact past those kept) and every text kept. A
// file that is not well formed, or not of the format, is refused with
// "FILE:LINE:COL: what" (twister.json: the JSON path of a wrong value), and
// nothing of it is kept. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hwfarm::results {

enum class CaseStatus { passed, failed, error, skipped };
std::string_view caseStatusName(CaseStatus s);

struct HarnessCase {
  std::string suite;     // the <testsuite>'s name; twister: the test suite's
  std::string classname; // JUnit's classname (pytest: the module path); twister: the platform
  std::string name;      // JUnit's name; twister: the case identifier
  CaseStatus status = CaseStatus::passed;
  double seconds = 0;
  // Of its <failure>, <error> or <skipped> (type and message attributes;
  // twister: its status and reason). A case with both a failure and an
  // error (pytest: a failing test whose teardown failed too) is failed,
  // its error kept beside it: a test failure is never hidden.
  std::string type;
  std::string message;
  std::string detail;        // the element's text: a traceback, the tail kept
  std::string error_type;    // a failed case's error too, if it had one
  std::string error_message;
  std::string error_detail;  // that error's own detail (its traceback), the tail kept
  std::string output;        // <system-out> and <system-err> (twister: the log), the tail kept
  std::vector<std::pair<std::string, std::string>> properties; // <property name value>, the first kept
  std::string platform;      // twister: the platform
  std::string dut;           // twister: the device under test's id, when it ran on one
};

struct HarnessLimits {
  size_t max_bytes = 64u << 20;    // a file
  size_t max_cases = 100000;       // read; more are refused
  size_t kept_cases = 20000;       // kept whole; past them counted only
  size_t max_text_bytes = 16384;   // each message, detail and output kept (the detail and output: their tail)
  size_t max_name_bytes = 1024;    // a suite, class or case name (cut, marked)
  size_t max_properties = 32;      // per case
  size_t max_text_total = 8u << 20; // texts kept over all cases; past it cases keep no text
};

struct HarnessResults {
  std::string format; // "junit" or "twister"
  std::vector<HarnessCase> cases; // in the file's order, the first kept_cases
  size_t passed = 0, failed = 0, errors = 0, skipped = 0; // over every case read
  size_t cases_left_out = 0; // read and counted, not kept
  size_t texts_left_out = 0; // cases kept without their texts (max_text_total)
  size_t total() const { return passed + failed + errors + skipped; }
};

// `text` of file `file` (its name, for messages) read as JUnit XML.
Result<HarnessResults> parseJunitXml(std::string_view text, std::string_view file, const HarnessLimits& limits = {});
// `text` of file `file` read as twister's twister.json (Zephyr 3.7's shape).
Result<HarnessResults> parseTwisterJson(std::string_view text, std::string_view file,
                                        const HarnessLimits& limits = {});
// Either, by the first byte that is not white space: '{' twister, '<' JUnit.
Result<HarnessResults> parseHarnessResults(std::string_view text, std::string_view file,
                                           const HarnessLimits& limits = {});

} // namespace hwfarm::results
