// The test firmware (tests/firmware/main.c) as the tests find it.
#pragma once

#include <string>

namespace hwfarm::test {

// The image of test firmware `variant` ("pass", "hang", ...), built for
// QEMU's mps2-an385. HWFARM_FIRMWARE_DIR is defined for every test that
// runs firmware (tests/CMakeLists.txt).
inline std::string firmware(const std::string& variant) {
  return std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf";
}

} // namespace hwfarm::test
