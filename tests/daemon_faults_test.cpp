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
#include "daemon/api/agent_state.h"
#include "daemon/api/auth.h"
#include "daemon/api/router.h"
#include "daemon/services/board_service.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/system_clock.h"
#include "tests/support/daemon_harness.h"

using namespace hwfarm;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// An answer channel that keeps what it was told.
struct Recorded : api::Exchange {
  std::optional<api::HttpResponse> response;
  bool respond(api::HttpResponse r) override {
    if (response) return false;
    response = std::move(r);
    return true;
  }
  void onClientGone(std::function<void()>) override {}
};

config::FleetConfig fleetOf(const test::TempDir& dir, int boards) {
  auto r = config::parseFleetConfig(test::qemuFleet(dir.file("state"), boards), "fleet.toml");
  REQUIRE(r.ok());
  return *r.config;
}

// The daemon's parts wired as hwfarmd wires them, without sockets.
struct InProcess {
  SystemClock clock;
  boost::asio::io_context io;
  AgentState state;
  Authenticator auth;
  std::unique_ptr<LeaseService> leases;
  std::unique_ptr<BoardService> boards;
  std::unique_ptr<api::Router> router;

  explicit InProcess(const config::FleetConfig& config) {
    std::filesystem::create_directories(config.agent.state_dir);
    state.config = std::make_shared<const config::FleetConfig>(config);
    state.effective_tier = config.agent.tier;
    auth.setAnonymousLoopback(true);
    leases = std::make_unique<LeaseService>(io, config, clock);
    boards = std::make_unique<BoardService>(io, config, [](const std::string&) { return std::string(); });
    router = std::make_unique<api::Router>(state, *leases, *boards, auth);
  }
  ~InProcess() {
    leases->stop();
    boards->stop();
    io.run_for(100ms);
  }
  std::shared_ptr<Recorded> send(const std::string& method, const std::string& target, const std::string& body = "") {
    auto exchange = std::make_shared<Recorded>();
    api::HttpRequest request;
    request.method = method;
    request.target = target;
    request.body = body;
    request.local_peer = true;
    router->handle(std::move(request), exchange);
    return exchange;
  }
  void reload(const config::FleetConfig& next) {
    state.config = std::make_shared<const config::FleetConfig>(next);
    boards->reconfigure(next);
    leases->reconfigure(next);
  }
  void runUntil(const std::shared_ptr<Recorded>& exchange) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!exchange->response && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
  }
};

} // namespace

// Issue 9, item 14: the answer to maintenance/resume looked the board up
// after the commit; a reload in between had removed it (a null board).
TEST_CASE("issue 9: maintenance and resume answer after a reload removed their board") {
  test::TempDir dir;
  InProcess d(fleetOf(dir, 2));
  for (const char* action : {"maintenance", "resume"}) {
    INFO(action);
    if (std::string(action) == "resume") {
      // Given sim-1 back in the fleet and in maintenance,
      d.reload(fleetOf(dir, 2));
      auto m = d.send("POST", "/v1/boards/sim-1/maintenance");
      d.runUntil(m);
      REQUIRE(m->response->status == 200);
    }
    // when the action is accepted and a reload drops the board before its
    // change is committed,
    auto answer = d.send("POST", std::string("/v1/boards/sim-1/") + action);
    REQUIRE_FALSE(answer->response);
    d.reload(fleetOf(dir, 1));
    d.runUntil(answer);
    // the caller learns that the board is gone.
    REQUIRE(answer->response);
    CHECK(answer->response->status == 404);
    CHECK(json::parse(answer->response->body) ==
          json::parse(R"({"error":"not_found","detail":"board sim-1 was removed from the configuration"})"));
  }
  // The daemon's parts still serve.
  auto boards = d.send("GET", "/v1/boards");
  REQUIRE(boards->response->status == 200);
}

// Issue 9, item 14: a console line read before its lease ended but handed
// out after it reached BoardService's line handler, which did
// consoles[name] on the erased console: a null log.
TEST_CASE("issue 9: a console line that arrives as its lease ends is dropped, not a crash") {
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
  BoardService boards(io, *parsed.config, [](const std::string&) { return std::string(); });
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
  std::string error;
  std::function<void()> cancel;
  bool ended = false;
  BoardService::Reader reader{[&](const std::string& t) {
                                got.push_back(t);
                                return true;
                              },
                              [&] { ended = true; },
                              [] { return size_t{0}; },
                              [](std::function<void()> drained) { drained(); }};
  REQUIRE(boards.readConsole(l, "tty-1", reader, &error, &cancel));
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
