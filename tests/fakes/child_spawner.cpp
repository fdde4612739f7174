// A parent that starts children the way hwfarmd does, then dies the way a
// test says: the subject of tests/drivers_reaper_test.cpp.
//
//   child_spawner DIR PHASE DEATH FIRMWARE
//
// Works in DIR (its working directory too). Starts its reaper first, as
// hwfarmd's main does, then brings a child to PHASE:
//   tools          a tool started from a thread that has ended since, through
//                  a shell, with children of its own: one in the background,
//                  one in a session of its own (setsid), one without any
//                  environment (env -i)
//   qemu-starting  QEMU's sandbox is being set up (the QEMU binary is
//                  DIR/qemu-gate, a script that waits for DIR/qemu/sock/gate)
//   qemu-waiting   QEMU waits for its console (nobody connects)
//   qemu-running   the firmware printed HWFARM BEGIN on the console
//   qemu-ended     the firmware printed HWFARM END; QEMU still runs
// and prints "ready". Then DEATH:
//   wait   it waits for the test to kill it
//   throw  an exception escapes main (std::terminate, then abort)
//   exit   _exit(1), as a sanitizer does after its report
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "drivers/qemu_board.h"
#include "drivers/reaper.h"
#include "drivers/serial_port.h"
#include "drivers/spawn.h"

namespace {

using namespace hwfarm::drivers;

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "child_spawner: %s\n", why.c_str());
  std::exit(2);
}

void waitForFile(const std::string& path) {
  for (int i = 0; i < 2000 && !std::filesystem::exists(path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!std::filesystem::exists(path)) fail("no " + path);
}

void startTools(const std::string& dir) {
  // From a thread that ends right after: PR_SET_PDEATHSIG would kill the
  // tool now; the reaper must not, and must kill it when this process dies.
  std::thread starter([&] {
    SpawnOptions o;
    o.argv = {"/bin/sh", "-c",
              "sleep 300 & setsid sleep 300 & env -i sleep 300 & touch " + dir + "/tools-started; exec sleep 300"};
    o.what = "a test tool";
    if (!spawnProcess(o)) fail("cannot spawn the tool");
  });
  starter.join();
  waitForFile(dir + "/tools-started");
}

// Reads the console at `fd` until a line starting with `record` arrived.
void readUntil(int fd, const std::string& record) {
  std::string text = "\n";
  char buffer[4096];
  while (text.find("\n" + record) == std::string::npos) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) fail("the console closed before " + record);
    text.append(buffer, static_cast<size_t>(n));
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 5) fail("usage: child_spawner DIR PHASE DEATH FIRMWARE");
  std::string dir = argv[1], phase = argv[2], death = argv[3], firmware = argv[4];
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core); // an abort is expected: no core file
  if (!startReaper()) fail("cannot start the reaper");
  setChildOwner(dir);
  hwfarm::config::QemuConfig qemu;
  qemu.machine = "mps2-an385";
  if (phase == "qemu-starting") qemu.binary = dir + "/qemu-gate";
  static QemuBoard board("sim", qemu, dir + "/qemu"); // never destroyed: this process dies with it running
  std::thread starting;
  if (phase == "tools") {
    startTools(dir);
  } else {
    if (!board.flash(firmware).ok()) fail("cannot stage " + firmware);
    std::string console;
    if (phase == "qemu-starting") {
      starting = std::thread([&] { (void)board.powerOn(&console); });
      waitForFile(dir + "/qemu/sock/started");
    } else {
      hwfarm::Status on = board.powerOn(&console);
      if (!on.ok()) fail(on.message());
      if (phase != "qemu-waiting") {
        hwfarm::Result<int> fd = connectUnixSocket(console.substr(5));
        if (!fd) fail(fd.status().message());
        readUntil(*fd, phase == "qemu-running" ? "HWFARM BEGIN" : "HWFARM END");
      }
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  if (death == "throw") throw std::runtime_error("an exception escapes main");
  if (death == "exit") ::_exit(1);
  for (;;) ::pause();
}
