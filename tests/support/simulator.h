// Simulated boards as the driver tests see them: the QEMU process, the
// console read raw, a board booted into the hang firmware. Header-only, for
// test files (it uses Catch2's REQUIRE); HWFARM_FIRMWARE_DIR must be defined.
#pragma once

#include <catch2/catch.hpp>

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "drivers/process_table.h"
#include "drivers/qemu_board.h"
#include "drivers/serial_port.h"
#include "tests/support/firmware.h"
#include "tests/support/wait.h"

namespace hwfarm::test {

// The QEMU process (not its sandbox) whose command line mentions `needle`;
// 0 when there is none.
inline pid_t qemuPid(const std::string& needle) {
  for (pid_t pid : drivers::listProcesses()) {
    std::vector<std::string> args = drivers::processArguments(pid);
    if (args.empty() || args[0].size() < 15 || args[0].compare(args[0].size() - 15, 15, "qemu-system-arm") != 0)
      continue;
    for (const auto& a : args)
      if (a.find(needle) != std::string::npos) return pid;
  }
  return 0;
}

// Whether no QEMU process mentions `needle` within 5 s (test code only: a
// SIGKILLed QEMU is torn down by the kernel on its own time).
inline bool qemuGone(const std::string& needle) {
  return !waitWhile([&] { return qemuPid(needle) != 0; }, std::chrono::seconds(5));
}

// Reads the console `fd` until `needle` arrived (true) or it closed or 20 s
// passed (false); "" reads to its end.
inline bool readConsole(int fd, const std::string& needle) {
  std::string text;
  char buffer[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return needle.empty();
    text.append(buffer, static_cast<size_t>(n));
    if (!needle.empty() && text.find(needle) != std::string::npos) return true;
  }
  return false;
}

// Powers `board` on with the test firmware `variant` and connects its
// console; the console's descriptor.
inline int bootFirmware(drivers::QemuBoard& board, const std::string& variant) {
  REQUIRE(board.flash(firmware(variant)).ok());
  std::string console;
  Status on = board.powerOn(&console);
  INFO(on.toString());
  REQUIRE(on.ok());
  auto fd = drivers::connectUnixSocket(console.substr(5));
  REQUIRE(fd);
  return *fd;
}

// Boots the hang firmware on `board` and reads its console until the
// firmware began; returns the console's descriptor.
inline int bootHang(drivers::QemuBoard& board) {
  int fd = bootFirmware(board, "hang");
  REQUIRE(readConsole(fd, "HWFARM BEGIN"));
  return fd;
}

} // namespace hwfarm::test
