// Fuzz target: the .npy reader (daemon/core/run/npy.h), on files a client
// reads from a golden directory. Invariants: it never crashes or reads
// outside the bytes; an array it accepts has at most max_values values, and
// written again as .npy and read back it is the same array; its golden text
// parses back to the same values (daemon/core/run/golden.h).
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/core/run/golden.h"
#include "daemon/core/run/npy.h"
#include "daemon/core/run/protocol.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Result<run::NpyArray> a = run::parseNpy(bytes, 4096);
  if (!a) {
    FUZZ_CHECK(!a.status().message().empty(), "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(a->values.size() <= 4096, "%zu values over the limit", a->values.size());
  Result<run::NpyArray> again = run::parseNpy(run::npyBytes(a->dtype, a->values), 4096);
  FUZZ_CHECK(again.ok(), "its own .npy refused: %s", again.status().message().c_str());
  FUZZ_CHECK(again->dtype == a->dtype && again->values.size() == a->values.size(), "written and read back differs");
  for (size_t i = 0; i < a->values.size(); ++i)
    FUZZ_CHECK(std::bit_cast<uint64_t>(again->values[i]) == std::bit_cast<uint64_t>(a->values[i]),
               "value %zu differs after a round trip", i);
  run::Parser p;
  p.feed(run::goldenText({{"c", "o", a->dtype, a->values}}));
  p.finish();
  const run::Output* o = p.result().findOutput("c", "o");
  FUZZ_CHECK(p.result().problems.empty() && o && o->complete(), "its golden text does not parse back");
  for (size_t i = 0; i < a->values.size(); ++i)
    FUZZ_CHECK(std::bit_cast<uint64_t>(o->values[i]) == std::bit_cast<uint64_t>(a->values[i]),
               "golden value %zu differs", i);
  return 0;
}
