// Fuzz target: the suite manifest and thresholds file parsers
// (daemon/cli/run_manifest.h), on TOML text from a CI checkout.
// Invariants: never a crash; a refusal names the file with a line and
// column; an accepted manifest has 1 to kMaxSuiteImages images, each with a
// path and a name, and parses again the same.
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "daemon/cli/run_manifest.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm::cli;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  SuiteManifest m;
  std::string error;
  if (!parseSuiteManifest(text, "fuzz.toml", &m, &error)) {
    FUZZ_CHECK(error.rfind("fuzz.toml:", 0) == 0 && error.find(": ", 10) != std::string::npos,
               "an error without FILE:LINE:COL: %s", error.c_str());
  } else {
    FUZZ_CHECK(!m.images.empty() && m.images.size() <= kMaxSuiteImages, "%zu images", m.images.size());
    for (const auto& img : m.images) FUZZ_CHECK(!img.path.empty() && !img.name.empty(), "an image without path or name");
    SuiteManifest again;
    FUZZ_CHECK(parseSuiteManifest(text, "fuzz.toml", &again, &error), "a second parse failed: %s", error.c_str());
    FUZZ_CHECK(again.images.size() == m.images.size() &&
                   boost::json::serialize(again.thresholds) == boost::json::serialize(m.thresholds),
               "a second parse differs");
  }
  boost::json::array rules;
  if (!parseThresholdsFile(text, "fuzz.toml", &rules, &error))
    FUZZ_CHECK(error.rfind("fuzz.toml:", 0) == 0, "a thresholds error without FILE:LINE:COL: %s", error.c_str());
  return 0;
}
