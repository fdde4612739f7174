// Catch2's main for every test binary, after the reaper: whatever the tests
// start (QEMU, tools, hwfarmd) ends with the test process, however it ends
// (a failed REQUIRE on a thread aborts, a ctest timeout kills).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "drivers/reaper.h"

int main(int argc, char** argv) {
  hwfarm::Result<pid_t> reaper = hwfarm::drivers::startReaper();
  if (!reaper) {
    std::fprintf(stderr, "%s\n", reaper.status().message().c_str());
    return 1;
  }
  int failed = Catch::Session().run(argc, argv);
  hwfarm::drivers::stopReaper(std::chrono::seconds(15));
  return failed;
}
