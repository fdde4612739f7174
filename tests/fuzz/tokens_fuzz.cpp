// Fuzz target: the bearer tokens file parser (config/tokens.h), from bytes.
// Invariants: either tokens or errors; every accepted token has a valid
// name, a known role and a 64-digit lower-case hex SHA-256, and names are
// unique.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "config/tokens.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  config::TokensResult r = config::parseTokens(text, "tokens.toml");
  for (const auto& e : r.errors) {
    std::string line = e.format();
    FUZZ_CHECK(line.rfind("tokens.toml", 0) == 0, "error without the file name: %s", line.c_str());
    FUZZ_CHECK(!e.message.empty(), "error without a message: %s", line.c_str());
  }
  if (!r.ok()) return 0;
  std::set<std::string> names;
  for (const auto& t : r.tokens) {
    FUZZ_CHECK(!t.name.empty() && t.name.size() <= 64, "bad name length %zu", t.name.size());
    FUZZ_CHECK(t.name != "anonymous", "reserved name accepted");
    FUZZ_CHECK(names.insert(t.name).second, "duplicate name %s", t.name.c_str());
    FUZZ_CHECK(t.sha256.size() == 64, "sha256 of %zu characters", t.sha256.size());
    for (char c : t.sha256)
      FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), "sha256 not lower-case hex: %s", t.sha256.c_str());
    std::string role = config::toString(t.role);
    FUZZ_CHECK(role == "viewer" || role == "pipeline" || role == "operator", "role %s", role.c_str());
  }
  return 0;
}
