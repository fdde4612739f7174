// Fuzz target: the upload credentials file parser (config/credentials.h),
// from bytes. Invariants: either credentials or errors; accepted keys are
// 1 to 256 printable ASCII characters without spaces (they go into an
// HTTP header); no error message quotes the secret.
#include <cstdint>
#include <string>
#include <string_view>

#include "config/credentials.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

namespace {

void checkKey(const std::string& key, const char* what) {
  FUZZ_CHECK(!key.empty() && key.size() <= 256, "%s of %zu bytes", what, key.size());
  for (unsigned char c : key) FUZZ_CHECK(c > ' ' && c < 0x7f, "%s holds byte 0x%02x", what, c);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  config::CredentialsResult r = config::parseCredentials(text, "s3.toml");
  for (const auto& e : r.errors) {
    std::string line = e.format();
    FUZZ_CHECK(line.rfind("s3.toml", 0) == 0, "error without the file name: %s", line.c_str());
    FUZZ_CHECK(!e.message.empty(), "error without a message: %s", line.c_str());
  }
  if (!r.ok()) {
    FUZZ_CHECK(r.credentials.secret_access_key.empty(), "a secret kept beside errors");
    return 0;
  }
  checkKey(r.credentials.access_key_id, "access_key_id");
  checkKey(r.credentials.secret_access_key, "secret_access_key");
  return 0;
}
