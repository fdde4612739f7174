// A fake board (tests/fakes/fake_board.cpp) for a test's fleet: its
// [[worker.board]] entry and its process. Header only: FAKE_BOARD_PATH is
// defined per test binary (tests/CMakeLists.txt).
#pragma once

#include <string>

#include "tests/support/process.h"

namespace hwfarm::test {

// Fake board `n` of type `type`: with a power switch, or (`switched` false)
// without one (power.driver = "none"), its flasher then resetting it.
inline std::string fakeBoard(const TempDir& dir, int n, bool switched = true, const std::string& type = "fake",
                      const std::string& extra = "") {
  std::string sock = dir.file("fake" + std::to_string(n) + ".sock"), link = dir.file("ttyFAKE" + std::to_string(n));
  auto tool = [&](const std::string& args) {
    return "[\"" FAKE_BOARD_PATH "\", " + args + "]";
  };
  std::string flash = "\"flash\", \"" + sock + "\", \"{image}\"" + (switched ? "" : ", \"reset\"");
  std::string board = "  [[worker.board]]\n  name = \"fake-" + std::to_string(n) + "\"\n  type = \"" + type + "\"\n"
                      "  usb = { vendor = \"1209\", product = \"0001\", serial = \"FAKE000" + std::to_string(n) +
                      "\" }\n"
                      "  serial = { port = \"" + link + "\" }\n"
                      "  flash = { driver = \"command\", argv = " + tool(flash) + ", timeout_s = 5 }\n";
  if (switched)
    board += "  power = { driver = \"command\", on = " + tool("\"power\", \"" + sock + "\", \"on\"") +
             ", off = " + tool("\"power\", \"" + sock + "\", \"off\"") + " }\n";
  return board + extra;
}

// Plugs fake board `n` in: its pty at ttyFAKE<n>, its control socket fake<n>.sock.
inline Process plugIn(const TempDir& dir, int n) {
  std::string s = std::to_string(n);
  return Process({FAKE_BOARD_PATH, "serve", "--link", dir.file("ttyFAKE" + s), "--control", dir.file("fake" + s + ".sock")},
                 dir.file("board" + s + ".out"), dir.file("board" + s + ".err"));
}

} // namespace hwfarm::test
