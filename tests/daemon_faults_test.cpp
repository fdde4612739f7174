// Faults inside hwfarmd's own parts, driven in process on a real event loop
// (issue 9, item 14): answers that arrive after a reload changed the fleet.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pty.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "config/loader.h"
#include "daemon/services/board_service.h"
#include "daemon/services/system_clock.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/in_process.h"

using namespace hwfarm;
namespace json = boost::json;
using namespace std::chrono_literals;

// Issue 9, item 14: the answer to maintenance/resume looked the board up
// after the commit; a reload in between had removed it (a null board).
TEST_CASE("maintenance and resume answer after a reload removed their board") {
  test::TempDir dir;
  test::InProcess d(test::simulatedFleet(dir, 2));
  auto action = [&](const std::string& what) {
    return d.start(&api::Handlers::boardAction, test::httpRequest("POST", "/v1/boards/sim-1/" + what),
                   test::callers::operator_, "sim-1", what);
  };
  for (const char* what : {"maintenance", "resume"}) {
    INFO(what);
    if (std::string(what) == "resume") {
      // Given sim-1 back in the fleet and in maintenance,
      d.reload(test::simulatedFleet(dir, 2));
      auto m = action("maintenance");
      d.runUntil(m);
      REQUIRE(m->status() == 200);
    }
    // when the action is accepted and a reload drops the board before its
    // change is committed,
    auto answer = action(what);
    REQUIRE_FALSE(answer->response);
    d.reload(test::simulatedFleet(dir, 1));
    d.runUntil(answer);
    // the caller learns that the board is gone.
    REQUIRE(answer->response);
    CHECK(answer->status() == 404);
    CHECK(json::parse(answer->body()) ==
          json::parse(R"({"error":"not_found","detail":"board sim-1 was removed from the configuration"})"));
  }
  // The daemon's parts still serve.
  REQUIRE(d.send("GET", "/v1/boards")->status() == 200);
}

// Issue 9, item 14: a console line read before its lease ended but handed
// out after it reached BoardService's line handler, which did
// consoles[name] on the erased console: a null log.
TEST_CASE("a console line that arrives as its lease ends is dropped, not a crash") {
  test::TempDir dir;
  int master = -1, slave = -1;
  char name[256];
  REQUIRE(::openpty(&master, &slave, name, nullptr, nullptr) == 0);
  std::string text = test::qemuFleet(dir.file("state"), 0) +
                     "  [[worker.board]]\n  name = \"tty-1\"\n  type = \"t\"\n"
                     "  usb = { vendor = \"1209\", product = \"0001\", serial = \"T1\" }\n"
                     "  serial = { port = \"" + std::string(name) + "\" }\n  power = { driver = \"none\" }\n";
  auto parsed = config::parseFleetConfig(text, "fleet.toml");
  REQUIRE(parsed.ok());
  std::filesystem::create_directories(dir.file("state"));
  boost::asio::io_context io;
  SystemClock clock;
  BoardService boards(io, *parsed.config, clock, [](const std::string&) { return std::string(); });
  lease::Lease l;
  l.id = "L1";
  l.boards = {{"tty-1", false, 0}};
  // Given output waiting on the console when it is opened (the first read
  // completes at once and its handler is queued),
  std::string line = "late line\n";
  REQUIRE(::write(master, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  pollfd p{slave, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  std::vector<std::string> got;
  std::function<void()> cancel;
  bool ended = false;
  BoardService::Reader reader{[&](const std::string& t) {
                                got.push_back(t);
                                return true;
                              },
                              [&] { ended = true; },
                              [] { return size_t{0}; },
                              [](std::function<void()> drained) { drained(); }};
  hwfarm::Status opened = boards.readConsole(l, "tty-1", reader, &cancel);
  INFO(opened.toString());
  REQUIRE(opened.ok());
  // when the lease ends before the loop runs that handler,
  boards.leaseEnded(l);
  io.run_for(200ms);
  // the line goes nowhere (the reader got the log's notes only) and the
  // reader was ended.
  CHECK(ended);
  for (const auto& text : got) CHECK(text.find("late line") == std::string::npos);
  ::close(master);
  ::close(slave);
}
