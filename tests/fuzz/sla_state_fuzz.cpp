// Fuzz target: <state_dir>/sla.json's decoder (daemon/services/sla_state_file.h),
// from bytes, and a policy resumed from what it accepts (what a restart does);
// the same bytes as a run's record (core/run/record.h) for boardOutcomes
// (sla_service.h) when they are one.
// Invariants: a refusal says why; an accepted state has its tiers in range
// and a pin record exactly when it is pinned, encodes to text that decodes
// to the same text again, and resumes a policy whose effective tier is 1..4;
// outcomes name each board once, never an empty one.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "daemon/core/health/sla_policy.h"
#include "daemon/core/run/record.h"
#include "daemon/services/sla_service.h"
#include "daemon/services/sla_state_file.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::set<std::string> boards;
  if (Result<run::Record> record = run::Record::fromJson(text); record.ok())
    for (const auto& o : boardOutcomes(*record)) {
      FUZZ_CHECK(!o.board.empty(), "an outcome without a board");
      FUZZ_CHECK(boards.insert(o.board).second, "board %s twice", o.board.c_str());
    }
  Result<SlaFile> file = decodeSlaFile(text);
  if (!file.ok()) {
    FUZZ_CHECK(!file.status().message().empty(), "refused without a reason");
    return 0;
  }
  const health::SlaState& s = file->state;
  FUZZ_CHECK(s.policy_tier >= 1 && s.policy_tier <= 4, "policy tier %d", s.policy_tier);
  FUZZ_CHECK(s.pinned.has_value() == file->pin.has_value(), "pinned without its record, or the reverse");
  FUZZ_CHECK(!s.pinned || (*s.pinned >= 1 && *s.pinned <= 3), "pinned tier %d", *s.pinned);
  std::string encoded = encodeSlaFile(*file);
  Result<SlaFile> again = decodeSlaFile(encoded);
  FUZZ_CHECK(again.ok(), "its own encoding refused: %s", again.status().message().c_str());
  FUZZ_CHECK(encodeSlaFile(*again) == encoded, "encoding not stable");
  if (s.runs.size() > 1000 || s.incidents.size() > 100) return 0; // keeps each input fast
  health::SlaOptions options;
  options.boards = {{"sim-0", "1-1"}, {"sim-1", "1-1"}};
  health::SlaPolicy policy(options, s);
  FUZZ_CHECK(policy.effectiveTier() >= 1 && policy.effectiveTier() <= 4, "effective tier %d", policy.effectiveTier());
  policy.advanceTo(s.now_ms);
  (void)policy.standing(s.now_ms);
  return 0;
}
