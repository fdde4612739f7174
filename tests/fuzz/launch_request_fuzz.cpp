// Fuzz target: the simulator launcher's request parser
// (drivers/sim_launcher.h), which reads whatever a peer on its socket sends.
// Invariants: never a crash; a refusal says "launch request: ..."; an
// accepted request has absolute paths, a QEMU command whose program is an
// absolute path, only hwfarmd's marks, no more than the limits, and encodes
// back to a request that parses to the same fields.
#include <cstdint>
#include <string>
#include <string_view>

#include "drivers/reaper.h"
#include "drivers/sim_launcher.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm::drivers;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  auto parsed = parseLaunchRequest(payload);
  if (!parsed) {
    FUZZ_CHECK(parsed.status().message().rfind("launch request: ", 0) == 0, "refusal without its subject: %s",
               parsed.status().message().c_str());
    return 0;
  }
  const LaunchRequest& r = *parsed;
  FUZZ_CHECK(!r.image.empty() && r.image[0] == '/', "image not absolute: %s", r.image.c_str());
  FUZZ_CHECK(r.socket_dir.size() > 1 && r.socket_dir[0] == '/', "socket_dir not absolute: %s", r.socket_dir.c_str());
  FUZZ_CHECK(!r.qemu.empty() && !r.qemu[0].empty() && r.qemu[0][0] == '/', "QEMU not absolute");
  FUZZ_CHECK(r.qemu.size() <= kLaunchArgsMax && r.marks.size() <= kLaunchMarksMax, "over a limit");
  for (const auto& mark : r.marks)
    FUZZ_CHECK(mark.rfind(std::string(kInstanceMark) + "=", 0) == 0 ||
                   mark.rfind(std::string(kOwnerMark) + "=", 0) == 0 ||
                   mark.rfind(std::string(kChildMark) + "=", 0) == 0,
               "a mark that is not hwfarmd's: %s", mark.c_str());
  auto again = parseLaunchRequest(encodeLaunchRequest(r));
  FUZZ_CHECK(again.ok(), "its own encoding refused: %s", again.status().message().c_str());
  FUZZ_CHECK(again->image == r.image && again->socket_dir == r.socket_dir && again->with_proc == r.with_proc &&
                 again->marks == r.marks && again->qemu == r.qemu,
             "the encoding changed the request");
  return 0;
}
