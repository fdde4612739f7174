// Fuzz target: a harness's results files (daemon/core/results): JUnit XML
// and twister.json, read with small limits so that every bound is reached.
// Invariants: never a crash; a refusal is invalid_argument naming the file
// (and for XML a line and column); accepted results count every case once,
// keep at most the limits' cases and text, and every kept case has a name.
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/core/results/harness_results.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;
using namespace hwfarm::results;

namespace {

void check(const Result<HarnessResults>& r, const HarnessLimits& limits, std::string_view file) {
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == Code::invalid_argument, "a refusal of another code: %s",
               r.status().message().c_str());
    FUZZ_CHECK(r.status().message().rfind(std::string(file) + ":", 0) == 0, "a refusal without the file: %s",
               r.status().message().c_str());
    return;
  }
  const HarnessResults& h = *r;
  FUZZ_CHECK(h.total() == h.cases.size() + h.cases_left_out, "%zu counted, %zu kept, %zu left out", h.total(),
             h.cases.size(), h.cases_left_out);
  FUZZ_CHECK(h.cases.size() <= limits.kept_cases, "%zu cases kept", h.cases.size());
  FUZZ_CHECK(h.total() <= limits.max_cases, "%zu cases read", h.total());
  size_t text = 0;
  for (const auto& c : h.cases) {
    FUZZ_CHECK(!c.name.empty(), "a case without a name");
    FUZZ_CHECK(c.name.size() <= limits.max_name_bytes + 3, "a name of %zu bytes", c.name.size());
    FUZZ_CHECK(c.message.size() <= limits.max_text_bytes + 3, "a message of %zu bytes", c.message.size());
    FUZZ_CHECK(c.detail.size() <= limits.max_text_bytes + 32, "a detail of %zu bytes", c.detail.size());
    FUZZ_CHECK(c.output.size() <= limits.max_text_bytes + 32, "an output of %zu bytes", c.output.size());
    FUZZ_CHECK(c.properties.size() <= limits.max_properties, "%zu properties", c.properties.size());
    FUZZ_CHECK(c.seconds >= 0, "a negative time");
    text += c.message.size() + c.error_message.size() + c.detail.size() + c.output.size();
  }
  FUZZ_CHECK(text <= limits.max_text_total, "%zu bytes of text kept", text);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  HarnessLimits limits;
  limits.max_cases = 200;
  limits.kept_cases = 50;
  limits.max_text_bytes = 256;
  limits.max_name_bytes = 64;
  limits.max_properties = 4;
  limits.max_text_total = 4096;
  check(parseJunitXml(text, "fuzz.xml", limits), limits, "fuzz.xml");
  check(parseTwisterJson(text, "fuzz.json", limits), limits, "fuzz.json");
  check(parseHarnessResults(text, "fuzz", limits), limits, "fuzz");
  return 0;
}
