// Test support: the daemon's services wired as hwfarmd wires them (a real
// LeaseService and BoardService over a temp state dir, on a test
// io_context), with no socket: tests call the route handlers
// (daemon/api/handlers.h) or the router directly and read the answer.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "config/fleet_config.h"
#include "daemon/api/agent_state.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers.h"
#include "daemon/api/router.h"
#include "daemon/services/board_service.h"
#include "daemon/services/board_targets.h"
#include "daemon/services/sla_service.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/run_service.h"
#include "daemon/services/system_clock.h"
#include "daemon/store/database.h"
#include "tests/support/process.h"

namespace hwfarm::test {

// `text` parsed as a fleet config; throws with the errors when it is not valid.
config::FleetConfig parseFleet(const std::string& text);
// qemuFleet's `boards` simulated boards, state in <dir>/state, parsed.
config::FleetConfig simulatedFleet(const TempDir& dir, int boards, const std::string& agent_extra = "");

// Runs `io` until `done()` holds; false if it still does not after `timeout`
// of real time.
template <typename Pred>
bool runLoopUntil(boost::asio::io_context& io, Pred done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return done();
}

// A request as the server hands it on (an empty body when `body` is).
api::HttpRequest httpRequest(const std::string& method, const std::string& target, const std::string& body = "");

// Callers as the router authenticates them, named as writeTokens names its
// tokens: one per role, and a second pipeline.
namespace callers {
extern const Principal viewer, pipeline, pipeline2, operator_;
}

// An answer channel that keeps what it is told: the first response (later
// ones are refused, as the server refuses a second answer), and the hook a
// handler that answers later registers for its client leaving.
struct Recorded : api::Exchange {
  std::optional<api::HttpResponse> response;
  std::function<void()> gone_hook;

  bool respond(api::HttpResponse r) override;
  void onClientGone(std::function<void()> hook) override { gone_hook = std::move(hook); }
  // The client leaves before the answer: runs the registered hook, if any.
  void hangUp();
  // The answer's status, 0 while there is none.
  int status() const { return response ? response->status : 0; }
  // The answer's body, and parsed as JSON; both throw while there is none.
  const std::string& body() const;
  boost::json::value json() const { return boost::json::parse(body()); }
};

// A call as the router makes it, and where its answer lands.
struct Pending {
  api::Call call;
  std::shared_ptr<Recorded> answer;
};

class InProcess {
 public:
  // Creates config.agent.state_dir and opens the services on it, restoring
  // the lease database and the SLA state (sla.json) found there. The
  // effective tier is the SLA service's (the agent's tier on a fresh state
  // dir); the router lets anonymous loopback callers in (as operator).
  explicit InProcess(const config::FleetConfig& config);
  // Stops the services and runs their last completions.
  ~InProcess();
  InProcess(const InProcess&) = delete;
  InProcess& operator=(const InProcess&) = delete;

  // A call from `who` (nothing: unauthenticated) to hand to a handler.
  Pending prepare(api::HttpRequest request, std::optional<Principal> who);

  // Calls `handler` (a member of api::Handlers) with a call from `who` and
  // the route's path arguments `args`; returns at once, the answer may come
  // later (run the loop with runUntil).
  template <class... Params, class... Args>
  std::shared_ptr<Recorded> start(void (api::Handlers::*handler)(api::Call&, Params...), api::HttpRequest request,
                                  std::optional<Principal> who, Args&&... args) {
    Pending p = prepare(std::move(request), std::move(who));
    ((*handlers).*handler)(p.call, std::forward<Args>(args)...);
    return p.answer;
  }
  // start(), then runs the loop until the answer came (5 s at most).
  template <class... Params, class... Args>
  std::shared_ptr<Recorded> call(void (api::Handlers::*handler)(api::Call&, Params...), api::HttpRequest request,
                                 std::optional<Principal> who, Args&&... args) {
    auto answer = start(handler, std::move(request), std::move(who), std::forward<Args>(args)...);
    runUntil(answer);
    return answer;
  }
  // Through the router, from a local peer sending `authorization`; runs the
  // loop until the answer came.
  std::shared_ptr<Recorded> send(const std::string& method, const std::string& target, const std::string& body = "",
                                 const std::string& authorization = "");

  // Runs the event loop until `answer` has a response or `timeout` passed.
  void runUntil(const std::shared_ptr<Recorded>& answer, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Applies `next` as a SIGHUP reload does: the state, then the services.
  void reload(const config::FleetConfig& next);
  // Closes the services and opens them again on the same state dir: what a
  // new hwfarmd finds there.
  void restart();

  SystemClock clock; // the services' time (handler tests run on real time)
  boost::asio::io_context io;
  AgentState state;
  Authenticator auth;
  std::unique_ptr<store::Database> db;
  std::unique_ptr<LeaseService> leases;
  std::unique_ptr<SlaService> sla; // fed the lease service's infrastructure failures, as hwfarmd does
  std::unique_ptr<BoardService> boards;
  std::unique_ptr<BoardTargets> targets;
  std::unique_ptr<RunService> runs;
  std::unique_ptr<api::Handlers> handlers;
  std::unique_ptr<api::Router> router;

 private:
  void open();
  void close();
};

} // namespace hwfarm::test
