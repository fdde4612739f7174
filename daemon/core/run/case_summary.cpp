#include "daemon/core/run/case_summary.h"

namespace hwfarm::run {
namespace {

bool failing(const CaseReport& c) { return c.outcome == Outcome::fail || c.outcome == Outcome::error; }

} // namespace

CaseCounts countCases(const std::vector<CaseReport>& cases, size_t kept) {
  CaseCounts n;
  n.cases = cases.size();
  n.left_out = cases.size() > kept ? cases.size() - kept : 0;
  for (const auto& c : cases) {
    switch (c.outcome) {
      case Outcome::pass: ++n.passed; break;
      case Outcome::fail: ++n.failed; break;
      case Outcome::skip: ++n.skipped; break;
      case Outcome::error: ++n.errors; break;
    }
  }
  return n;
}

namespace {

// The indexes of `items` kept, in their order: the failing ones first (up
// to `limit`), then the others while room is left.
template <class T, class Failing>
std::vector<size_t> keptFirst(const std::vector<T>& items, size_t limit, Failing is_failing) {
  std::vector<bool> keep(items.size(), items.size() <= limit);
  size_t room = items.size() <= limit ? 0 : limit;
  auto take = [&](auto wanted) {
    for (size_t i = 0; i < items.size() && room; ++i)
      if (!keep[i] && wanted(items[i])) {
        keep[i] = true;
        --room;
      }
  };
  take(is_failing);
  take([](const T&) { return true; });
  std::vector<size_t> out;
  for (size_t i = 0; i < items.size(); ++i)
    if (keep[i]) out.push_back(i);
  return out;
}

} // namespace

std::vector<size_t> keptCases(const std::vector<CaseReport>& cases, size_t limit) {
  return keptFirst(cases, limit, failing);
}

std::vector<size_t> keptOutputs(const std::vector<OutputResult>& outputs, size_t limit) {
  return keptFirst(outputs, limit, [](const OutputResult& o) { return o.comparison.verdict == Verdict::fail; });
}

std::string keptMessage(std::string_view message, size_t limit) {
  if (message.size() <= limit) return std::string(message);
  size_t cut = limit;
  // Back to the start of a UTF-8 sequence (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return std::string(message.substr(0, cut)) + " [... " + std::to_string(message.size() - cut) + " more bytes]";
}

} // namespace hwfarm::run
