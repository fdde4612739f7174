// Fuzz target: a run's record read back from JSON (core/run/record.h: what
// start-up reads from the database and from an older hwfarmd's
// summary.json). Invariants: a refusal says why; an accepted record writes
// JSON that reads back to a record writing the same JSON, and its rules
// (the failure class, the verdict, the progress) hold on it.
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/core/run/record.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<run::Record> r = run::Record::fromJson(text);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().is(Code::invalid_argument), "refused with %s", r.status().toString().c_str());
    FUZZ_CHECK(!r.status().message().empty(), "refused without a reason");
    return 0;
  }
  std::string json = r->toJson();
  Result<run::Record> again = run::Record::fromJson(json);
  FUZZ_CHECK(again.ok(), "its own JSON refused: %s", again.status().message().c_str());
  FUZZ_CHECK(again->toJson() == json, "JSON not stable");
  FUZZ_CHECK(r->doneCount() <= r->attempts.size(), "more done than attempts");
  run::Record judged = *r;
  judged.judge();
  run::State v = judged.verdict();
  FUZZ_CHECK(v == run::State::passed || v == run::State::failed || v == run::State::error, "verdict %d",
             static_cast<int>(v));
  return 0;
}
