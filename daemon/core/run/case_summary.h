// How much of an attempt's cases its record, summary.json and junit.xml
// keep (docs/runs.md, "Huge outputs"): a firmware may print 10,000 cases
// per image, and a run may have hundreds of images. The counts are of every
// case, always exact; the cases themselves are kept in full up to a bound,
// failing and erring ones first, and the rest are only counted (the trace
// and the other artifacts have them all). The verdict never depends on
// what is kept: it comes from every case (report.h). Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/run/report.h"

namespace hwfarm::run {

inline constexpr size_t kKeptCases = 100;         // per attempt, in full
inline constexpr size_t kKeptMessageBytes = 1024; // of each kept case's message
inline constexpr size_t kKeptOutputs = 20;        // of each kept case's outputs, in the record

// An attempt's cases by outcome, of all of them; `left_out`: how many the
// record (or junit.xml) does not list.
struct CaseCounts {
  size_t cases = 0, passed = 0, failed = 0, skipped = 0, errors = 0;
  size_t left_out = 0;
  bool operator==(const CaseCounts&) const = default;
};

// The counts of `cases` when `kept` of them are listed.
CaseCounts countCases(const std::vector<CaseReport>& cases, size_t kept);

// The indexes of the cases kept of `cases`, in their order: the failing
// and erring ones first (up to `limit`), then the others while room is
// left. All of them when there are at most `limit`.
std::vector<size_t> keptCases(const std::vector<CaseReport>& cases, size_t limit = kKeptCases);

// The indexes of the outputs a kept case lists of `outputs`, in their
// order: the failing ones first (up to `limit`), then the others while
// room is left. (Every output is judged and written as .npy; a case with
// thousands of outputs lists `limit` in the record and counts the rest.)
std::vector<size_t> keptOutputs(const std::vector<OutputResult>& outputs, size_t limit = kKeptOutputs);

// `message` as a kept case shows it: whole up to `limit` bytes, else its
// first bytes (cut before a UTF-8 sequence, never inside one) and
// " [... N more bytes]".
std::string keptMessage(std::string_view message, size_t limit = kKeptMessageBytes);

} // namespace hwfarm::run
