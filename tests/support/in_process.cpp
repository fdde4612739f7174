#include "tests/support/in_process.h"

#include <filesystem>
#include <stdexcept>

#include "config/loader.h"
#include "tests/support/daemon_harness.h"

namespace hwfarm::test {

config::FleetConfig parseFleet(const std::string& text) {
  auto parsed = config::parseFleetConfig(text, "fleet.toml");
  if (!parsed.ok()) {
    std::string errors;
    for (const auto& e : parsed.errors) errors += e.format() + "\n";
    throw std::runtime_error("invalid test fleet:\n" + errors);
  }
  return *parsed.config;
}

config::FleetConfig simulatedFleet(const TempDir& dir, int boards, const std::string& agent_extra) {
  return parseFleet(qemuFleet(dir.file("state"), boards, agent_extra));
}

api::HttpRequest httpRequest(const std::string& method, const std::string& target, const std::string& body) {
  api::HttpRequest r;
  r.method = method;
  r.target = target;
  r.body = body;
  return r;
}

namespace callers {
const Principal viewer{"viewer", config::Role::viewer};
const Principal pipeline{"pipeline", config::Role::pipeline};
const Principal pipeline2{"pipeline2", config::Role::pipeline};
const Principal operator_{"operator", config::Role::operator_};
} // namespace callers

bool Recorded::respond(api::HttpResponse r) {
  if (response) return false;
  response = std::move(r);
  return true;
}

void Recorded::hangUp() {
  if (auto hook = std::exchange(gone_hook, {})) hook();
}

const std::string& Recorded::body() const {
  if (!response) throw std::runtime_error("no answer (yet)");
  return response->body;
}

InProcess::InProcess(const config::FleetConfig& config) {
  std::filesystem::create_directories(config.agent.state_dir);
  state.config = std::make_shared<const config::FleetConfig>(config);
  auth.setAnonymousLoopback(true);
  open();
}

InProcess::~InProcess() { close(); }

void InProcess::open() {
  // As the daemon wires them: one database, its services' tables in it.
  db = openDatabase(*state.config);
  leases = std::make_unique<LeaseService>(io, *state.config, clock, *db);
  boards = std::make_unique<BoardService>(io, *state.config, clock, [](const std::string&) { return std::string(); });
  targets = std::make_unique<BoardTargets>(io, *state.config, *boards);
  runs = std::make_unique<RunService>(io, *state.config, *targets, *leases, clock, *db);
  startDatabase(*db, io);
  leases->onLeaseEnded([this](const lease::Lease& l) {
    runs->leaseEnded(l);
    boards->leaseEnded(l);
  });
  sla = std::make_unique<SlaService>(io, *state.config, clock);
  followTier(state, *sla);
  leases->onInfrastructureFailureRecorded([this](const lease::Event& e) { sla->infraFailure(e.board, e.detail); });
  handlers = std::make_unique<api::Handlers>(state, *leases, *boards, runs.get());
  router = std::make_unique<api::Router>(state, *leases, *boards, auth, runs.get());
  handlers->setSla(sla.get());
  router->setSla(sla.get());
}

void InProcess::close() {
  runs->stop();
  leases->stop();
  boards->stop();
  sla->stop();
  io.restart();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (runs->runningCount() > 0 && std::chrono::steady_clock::now() < until) io.run_for(std::chrono::milliseconds(10));
  io.run_for(std::chrono::milliseconds(100));
  router.reset();
  handlers.reset();
  db.reset(); // before the services whose tables it holds
  runs.reset();
  targets.reset();
  sla.reset();
  boards.reset();
  leases.reset();
}

void InProcess::restart() {
  close();
  io.restart();
  open();
}

Pending InProcess::prepare(api::HttpRequest request, std::optional<Principal> who) {
  auto answer = std::make_shared<Recorded>();
  return Pending{api::Call(std::move(request), std::move(who), api::Reply(answer)), answer};
}

std::shared_ptr<Recorded> InProcess::send(const std::string& method, const std::string& target,
                                          const std::string& body, const std::string& authorization) {
  auto answer = std::make_shared<Recorded>();
  api::HttpRequest request = httpRequest(method, target, body);
  request.authorization = authorization;
  request.local_peer = true;
  router->handle(std::move(request), answer);
  runUntil(answer);
  return answer;
}

void InProcess::runUntil(const std::shared_ptr<Recorded>& answer, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!answer->response && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

void InProcess::reload(const config::FleetConfig& next) {
  state.config = std::make_shared<const config::FleetConfig>(next);
  sla->reconfigure(next);
  boards->reconfigure(next);
  targets->reconfigure(next);
  leases->reconfigure(next);
  runs->reconfigure(next);
}

} // namespace hwfarm::test
