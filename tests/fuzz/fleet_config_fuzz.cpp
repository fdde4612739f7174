// Fuzz target: the TOML fleet config loader, from bytes (config/loader.h).
// Invariants: a result is a config or errors, never both; every error names
// the file; a config that loads loads again the same (the loader is pure),
// and each of its boards is found by name.
#include <cstdint>
#include <string>
#include <string_view>

#include "config/loader.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  config::LoadResult r = config::parseFleetConfig(text, "fuzz.toml");
  FUZZ_CHECK(r.config.has_value() == r.errors.empty(), "config set: %d, %zu error(s)", r.config.has_value(),
             r.errors.size());
  for (const auto& e : r.errors) {
    std::string line = e.format();
    FUZZ_CHECK(line.rfind("fuzz.toml", 0) == 0, "error without the file name: %s", line.c_str());
    FUZZ_CHECK(!e.message.empty(), "error without a message: %s", line.c_str());
    FUZZ_CHECK(e.line >= 0 && e.column >= 0, "negative position: %s", line.c_str());
  }
  if (r.config) {
    config::LoadResult again = config::parseFleetConfig(text, "fuzz.toml");
    FUZZ_CHECK(again.ok(), "second load of the same text failed");
    FUZZ_CHECK(again.config->boardCount() == r.config->boardCount(), "board count differs");
    for (const auto& w : r.config->workers)
      for (const auto& b : w.boards) FUZZ_CHECK(r.config->findBoard(b.name) != nullptr, "board %s not found by name", b.name.c_str());
  }
  return 0;
}
