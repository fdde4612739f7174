#include "daemon/app/daemon.h"

#include <csignal>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "config/echo.h"
#include "config/tokens.h"
#include "daemon/api/agent_state.h"
#include "daemon/api/auth.h"
#include "daemon/api/router.h"
#include "daemon/api/server.h"
#include "daemon/api/tls_identity.h"
#include "daemon/api/json_codec.h"
#include "daemon/app/log.h"
#include "daemon/app/sd_notify.h"
#include "daemon/app/state_dir.h"
#include "daemon/app/version.h"
#include "daemon/services/board_service.h"
#include "daemon/services/board_targets.h"
#include "daemon/services/health_service.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/run_index.h"
#include "daemon/services/run_service.h"
#include "daemon/services/upload_service.h"
#include "config/credentials.h"
#include "daemon/services/sla_service.h"
#include "daemon/services/disk_room.h"
#include "daemon/services/presence.h"
#include "daemon/services/system_clock.h"
#include "daemon/store/database.h"
#include "drivers/reaper.h"
#include "drivers/usb_discovery.h"

namespace hwfarm {
namespace asio = boost::asio;

namespace {

// Boards whose presence is their console path existing.
std::map<std::string, std::string> watchedPaths(const config::FleetConfig& c) {
  std::map<std::string, std::string> paths;
  for (const auto& w : c.workers)
    for (const auto& b : w.boards)
      if (b.driver == "usb" && b.serial.port != "auto") paths[b.name] = b.serial.port;
  return paths;
}

// Marks every child from now on with the state directory, and stops what an
// earlier daemon on it left running (a simulator, a flasher still holding a
// board: its reaper died with it), before any board is used.
void takeOverChildren(const std::string& state_dir) {
  drivers::setChildOwner(state_dir);
  for (const auto& p : drivers::stopLeftovers(state_dir, std::chrono::seconds(10)))
    spdlog::warn("stopped {} (pid {}), left running by an earlier hwfarmd on {}: {}", p.what, p.pid, state_dir,
                 p.command);
}

// Loads the tokens file named by the config (none: no tokens). Errors are
// returned formatted.
std::vector<std::string> loadTokens(const config::FleetConfig& c, std::vector<config::Token>* tokens) {
  tokens->clear();
  if (c.agent.tokens_file.empty()) return {};
  config::TokensResult r = config::loadTokensFile(c.agent.tokens_file);
  std::vector<std::string> errors;
  for (const auto& e : r.errors) errors.push_back(e.format());
  *tokens = std::move(r.tokens);
  return errors;
}

// Loads upload.credentials_file when uploads are enabled. Errors are
// returned formatted.
std::vector<std::string> loadUploadCredentials(const config::FleetConfig& c, config::S3Credentials* credentials) {
  *credentials = {};
  if (!c.upload.enabled) return {};
  config::CredentialsResult r = config::loadCredentialsFile(c.upload.credentials_file);
  std::vector<std::string> errors;
  for (const auto& e : r.errors) errors.push_back(e.format());
  *credentials = std::move(r.credentials);
  return errors;
}

bool servesHttps(const config::FleetConfig& c) {
  for (const auto& l : c.agent.listen)
    if (l.kind == config::ListenAddress::Kind::tls) return true;
  return false;
}

// Loads agent.tls_cert and tls_key when a listen address is https://
// (none: *identity stays null). Errors are returned formatted.
std::vector<std::string> loadTls(const config::FleetConfig& c, std::shared_ptr<const api::TlsIdentity>* identity) {
  identity->reset();
  if (!servesHttps(c)) return {};
  auto loaded = api::TlsIdentity::load(c.agent.tls_cert, c.agent.tls_key);
  if (!loaded.ok()) return {loaded.status().message()};
  *identity = std::move(loaded.value());
  return {};
}

// What the certificate says, and a warning when it has expired or expires
// within 30 days (clients refuse an expired one).
void logTls(const api::TlsIdentity& identity, int64_t now_ms) {
  std::string until = api::rfc3339(identity.notAfterMs());
  spdlog::info("TLS certificate {} from {}, valid until {}", identity.subject(), identity.certFile(), until);
  int64_t left_ms = identity.notAfterMs() - now_ms;
  if (left_ms <= 0)
    spdlog::error("the TLS certificate {} expired at {}: clients refuse it; renew it and reload (agent.tls_cert)",
                  identity.certFile(), until);
  else if (left_ms < int64_t{30} * 86400 * 1000)
    spdlog::warn("the TLS certificate {} expires at {} ({} days left): renew it and reload (agent.tls_cert)",
                 identity.certFile(), until, left_ms / 86400000);
}

struct Loaded {
  config::LoadResult result;
  std::string text;
};

Loaded loadWithText(const std::string& path) {
  Loaded loaded;
  if (path.empty()) {
    loaded.text = std::string(config::embeddedSimFleet());
    loaded.result = config::parseFleetConfig(loaded.text, config::kEmbeddedSimFleetName);
  } else {
    loaded.result = config::loadFleetConfigFile(path, &loaded.text);
  }
  return loaded;
}

std::string summary(const config::FleetConfig& c) {
  return "agent " + c.agent.name + ", tier " + std::to_string(c.agent.tier) + ", " +
         std::to_string(c.workers.size()) + " workers, " + std::to_string(c.boardCount()) + " boards";
}

bool sameListen(const config::AgentConfig& a, const config::AgentConfig& b) {
  if (a.listen.size() != b.listen.size()) return false;
  for (size_t i = 0; i < a.listen.size(); ++i)
    if (a.listen[i].text != b.listen[i].text) return false;
  return true;
}

// A reload's input, read and parsed off the event loop.
struct PreparedReload {
  Loaded loaded;
  std::vector<config::Token> tokens;
  config::S3Credentials upload_credentials;
  std::shared_ptr<const api::TlsIdentity> tls; // re-read at every reload: a renewed certificate
  std::string sha256; // of the config text
};

// Reads and checks the config and its tokens file: pure file reads and
// parsing, safe on any thread.
PreparedReload prepareReload(const std::string& path) {
  PreparedReload p;
  p.loaded = loadWithText(path);
  // The tokens file is part of the configuration: its errors fail the reload too.
  if (p.loaded.result.ok())
    for (const auto& e : loadTokens(*p.loaded.result.config, &p.tokens))
      p.loaded.result.errors.push_back(config::ConfigError{"", 0, 0, "", "", e});
  if (p.loaded.result.ok())
    for (const auto& e : loadUploadCredentials(*p.loaded.result.config, &p.upload_credentials))
      p.loaded.result.errors.push_back(config::ConfigError{"", 0, 0, "", "", e});
  if (p.loaded.result.ok())
    for (const auto& e : loadTls(*p.loaded.result.config, &p.tls))
      p.loaded.result.errors.push_back(config::ConfigError{"", 0, 0, "", "", e});
  p.sha256 = config::sha256Hex(p.loaded.text);
  return p;
}

// One reload running on its own thread. `abandoned` (under `mutex`) tells a
// thread that outlived the daemon not to post its result.
struct ReloadJob {
  std::mutex mutex;
  bool abandoned = false;
  bool finished = false;
};

} // namespace

config::LoadResult loadConfig(const std::string& path) { return loadWithText(path).result; }

struct Daemon::Impl {
  explicit Impl(DaemonOptions o) : options(std::move(o)), signals(io, SIGHUP, SIGTERM, SIGINT) {}
  ~Impl();

  int run();
  void waitForSignal();
  void onSignal(int signal);
  void reload();
  void applyReload(PreparedReload prepared);
  void beginStop(const char* why);
  void pingWatchdog();
  void pruneLogs(); // now, then hourly
  void openRunIndex(); // REQUIRES: the database not started yet

  DaemonOptions options;
  asio::io_context io;
  asio::signal_set signals;
  asio::steady_timer watchdog_timer{io};
  asio::steady_timer stop_deadline{io};
  asio::steady_timer prune_timer{io};
  std::optional<std::chrono::microseconds> watchdog_interval;
  SystemClock clock; // the lease service's time and the agent's timestamps
  AgentState state;
  Authenticator auth;
  std::unique_ptr<StateDirLock> state_lock;
  std::unique_ptr<LeaseService> leases;
  std::unique_ptr<SlaService> sla;
  std::unique_ptr<BoardService> boards;
  std::unique_ptr<BoardTargets> targets; // boards and simulators, for runs and health checks
  std::unique_ptr<RunService> runs;
  std::unique_ptr<HealthService> health;
  std::unique_ptr<UploadService> uploads;
  std::unique_ptr<RunIndex> run_index; // the dashboard's index of runs
  // The services' tables live in it: it goes first (its last commits use
  // their tables), and they do not use it once it is gone.
  std::unique_ptr<store::Database> db;
  std::unique_ptr<PresenceWatcher> presence;
  std::unique_ptr<drivers::UsbDiscovery> usb;
  std::map<std::string, bool> usb_present;  // boards found by USB discovery
  std::mutex tty_mutex;                      // guards ttys: read by driver threads
  std::map<std::string, std::string> ttys;   // board -> console tty from discovery
  std::map<std::string, std::string> usb_ports; // board -> its USB port path ("1-1.4") from discovery
  // " [hub H]" for `board`'s USB hub: its uhubctl switch's, else the hub
  // discovery found it on; "" when unknown (a simulated board).
  std::string hubNote(const std::string& board) {
    const config::BoardConfig* b = state.config->findBoard(board);
    std::string hub = b && b->power.driver == "uhubctl" ? b->power.hub : "";
    if (hub.empty()) {
      std::lock_guard lock(tty_mutex);
      if (auto it = usb_ports.find(board); it != usb_ports.end()) hub = drivers::usbHubOf(it->second);
    }
    return hub.empty() ? "" : " [hub " + hub + "]";
  }
  void usbChanged();
  void refreshTtys(const drivers::BoardMatch& match);
  std::unique_ptr<api::Router> router;
  std::unique_ptr<api::HttpServer> server;
  bool stopping = false;
  // The reload in progress (parsed on reload_thread), and whether another
  // SIGHUP came meanwhile.
  std::shared_ptr<ReloadJob> reload_job;
  std::thread reload_thread;
  bool reload_again = false;
};

Daemon::Impl::~Impl() {
  if (!reload_thread.joinable()) return;
  bool finished;
  {
    std::lock_guard lock(reload_job->mutex);
    reload_job->abandoned = true;
    finished = reload_job->finished;
  }
  // A reload blocked reading its file (a FIFO, a hung mount) must not hold up
  // the exit: it is left to end with the process and will post nothing.
  if (finished) reload_thread.join();
  else reload_thread.detach();
}

int Daemon::Impl::run() {
  Loaded loaded = loadWithText(options.config_path);
  if (!loaded.result.ok()) {
    for (const auto& e : loaded.result.errors) spdlog::error("{}", e.format());
    spdlog::critical("configuration has {} error(s); not starting", loaded.result.errors.size());
    return 1;
  }
  auto config = std::make_shared<const config::FleetConfig>(std::move(*loaded.result.config));
  setLogLevel(config->agent.log_level);
  state.config = config;
  state.version = kVersion;
  state.started_at_ms = clock.wallMs();
  state.config_status.generation = 1;
  state.config_status.source = config->source;
  state.config_status.sha256 = config::sha256Hex(loaded.text);
  state.config_status.loaded_at_ms = state.started_at_ms;

  std::vector<config::Token> tokens;
  std::vector<std::string> token_errors = loadTokens(*config, &tokens);
  if (!token_errors.empty()) {
    for (const auto& e : token_errors) spdlog::error("{}", e);
    spdlog::critical("tokens file {} is not usable; not starting", config->agent.tokens_file);
    return 1;
  }
  auth.setTokens(tokens);
  auth.setAnonymousLoopback(config->agent.anonymous_loopback);
  config::S3Credentials upload_credentials;
  if (auto errors = loadUploadCredentials(*config, &upload_credentials); !errors.empty()) {
    for (const auto& e : errors) spdlog::error("{}", e);
    spdlog::critical("upload.credentials_file {} is not usable; not starting", config->upload.credentials_file);
    return 1;
  }
  std::shared_ptr<const api::TlsIdentity> tls;
  if (auto errors = loadTls(*config, &tls); !errors.empty()) {
    for (const auto& e : errors) spdlog::error("{}", e);
    spdlog::critical("the TLS certificate or key is not usable; not starting");
    return 1;
  }

  try {
    state_lock = std::make_unique<StateDirLock>(config->agent.state_dir);
    takeOverChildren(config->agent.state_dir);
    if (std::string ballast = tendBallast(config->agent.state_dir,
                                          static_cast<uint64_t>(config->limits.disk_reserve_bytes));
        !ballast.empty())
      spdlog::log(ballast.rfind("made ", 0) == 0 ? spdlog::level::info : spdlog::level::warn, "{}", ballast);
    db = openDatabase(*config);
    leases = std::make_unique<LeaseService>(io, *config, clock, *db);
    boards = std::make_unique<BoardService>(io, *config, clock, [this](const std::string& board) {
      std::lock_guard lock(tty_mutex);
      auto it = ttys.find(board);
      return it == ttys.end() ? std::string() : it->second;
    });
    targets = std::make_unique<BoardTargets>(io, *config, *boards);
    runs = std::make_unique<RunService>(io, *config, *targets, *leases, clock, *db);
    uploads = std::make_unique<UploadService>(io, *config, clock, *db, runs->dir());
    openRunIndex();
    startDatabase(*db, io);
    uploads->configure(*config, std::move(upload_credentials));
    runs->onRunEnded([this](const run::Record& run) { uploads->runEnded(run); });
    // Runs a restart cut short ended then: their records go up too.
    for (const auto& run : runs->interruptedAtStart()) uploads->runEnded(run);
    health = std::make_unique<HealthService>(io, *config, *boards, *targets, *leases, clock);
    // A run's infrastructure failures are events against their boards (the SLA's input).
    runs->onInfrastructureFailure([this](const std::string& lease, const std::string& board, const std::string& why) {
      leases->recordInfrastructureFailure(lease, board, why + (board.empty() ? "" : hubNote(board)));
      if (!board.empty()) health->infrastructureFailure(board); // checked once its lease ends
    });
    // The tier SLA: the infrastructure failures the lease service records
    // (a run's, a board lost) and the runs' outcomes; its effective tier is
    // what the lease routes serve.
    sla = std::make_unique<SlaService>(io, *config, clock);
    followTier(state, *sla);
    leases->onInfrastructureFailureRecorded([this](const lease::Event& e) { sla->infraFailure(e.board, e.detail); });
    runs->onRunEnded([this](const run::Record& run) { sla->runEnded(run); });
    // Health checks resolve (or join) the SLA's incidents; a failure that is
    // part of a hub's or the host's incident does not quarantine the board.
    health->onChecked([this](const std::string& board, const health::CheckRecord& check) {
      sla->checkEnded(board, check.passed(), check.evidence());
    });
    health->setCorrelation([this](const std::string& board) { return sla->correlated(board); });
    leases->onLeaseEnded([this](const lease::Lease& l) {
      runs->leaseEnded(l); // first: a run's boards are powered off through the board service
      boards->leaseEnded(l);
      health->leaseEnded(l);
    });
    std::set<std::string> ended; // while hwfarmd was down: their image stores go
    for (const auto& [id, l] : leases->scheduler().leases())
      if (l.state != lease::LeaseState::active) ended.insert(id);
    boards->removeImageStores(std::move(ended));
    pruneLogs();
    presence = std::make_unique<PresenceWatcher>(
        io, [this](const std::string& board, bool present) { leases->presence(board, present); });
    presence->watch(watchedPaths(*config));
    try {
      usb = std::make_unique<drivers::UsbDiscovery>(io, [this] { usbChanged(); });
      state.usb_discovery = true;
      usbChanged();
      boards->onConsoleLookup([this] {
        if (usb) refreshTtys(drivers::matchBoards(*state.config, usb->devices()));
      });
    } catch (const std::exception& e) {
      spdlog::warn("USB discovery unavailable ({}): boards with serial.port = \"auto\" stay offline", e.what());
    }
    router = std::make_unique<api::Router>(state, *leases, *boards, auth, runs.get(), health.get(), uploads.get());
    // Besides connections: the database, the log, event and timer fds, and
    // per board a console, its log and a child's pipes.
    size_t own_descriptors = 64 + 4 * config->boardCount();
    server = std::make_unique<api::HttpServer>(
        io, config->limits,
        [this](api::HttpRequest request, std::shared_ptr<api::Exchange> exchange) {
          router->handle(std::move(request), std::move(exchange));
        },
        own_descriptors);
    server->setBodyPolicy([this](const api::HttpRequest& head) { return router->planBody(head); });
    state.server_stats = [this] { return server ? server->stats() : api::ServerStats{}; };
    router->setSla(sla.get());
    router->setRunIndex(run_index.get());
    if (tls) {
      logTls(*tls, clock.wallMs());
      server->setTlsIdentity(tls);
    }
    for (const auto& address : config->agent.listen) {
      spdlog::info("listening on {}", server->listen(address));
      if (address.kind == config::ListenAddress::Kind::tcp && !address.isLoopback())
        spdlog::warn("{}: plain HTTP on a network address: bearer tokens cross the network in clear text; "
                     "listen on https:// instead (agent.tls_cert, agent.tls_key)",
                     address.text);
    }
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
  if (!config->agent.tokens_file.empty())
    spdlog::info("{} token(s) loaded from {}", auth.tokenCount(), config->agent.tokens_file);
  else if (!config->agent.anonymous_loopback)
    spdlog::warn("no agent.tokens_file and agent.anonymous = \"off\": only GET /v1/healthz can be used");
  if (config->agent.anonymous_loopback)
    spdlog::warn("anonymous access is allowed from loopback and unix-socket clients "
                 "(agent.anonymous = \"loopback\"); use tokens on shared machines");
  if (Status room = roomForWork(config->agent.state_dir, static_cast<uint64_t>(config->limits.disk_reserve_bytes));
      room.is(Code::no_space))
    spdlog::warn("{}: hwfarmd takes no new lease or run until space is freed", room.message());
  spdlog::info("hwfarmd {} ready: {} (config generation 1 from {}, state in {})", kVersion,
               summary(*config), config->source, config->agent.state_dir);

  waitForSignal();
  watchdog_interval = systemd::watchdogPingInterval();
  if (watchdog_interval) {
    spdlog::debug("systemd watchdog: pinging every {} ms", watchdog_interval->count() / 1000);
    pingWatchdog();
  }
  systemd::ready("serving " + summary(*config));
  io.run();
  spdlog::info("hwfarmd stopped");
  return 0;
}

void Daemon::Impl::waitForSignal() {
  signals.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    onSignal(signal);
    waitForSignal();
  });
}

void Daemon::Impl::onSignal(int signal) {
  if (signal == SIGHUP) return reload();
  if (stopping) {
    spdlog::warn("second {} during shutdown: stopping now", strsignal(signal));
    io.stop();
    return;
  }
  beginStop(strsignal(signal));
}

// The dashboard's run index: who held a run's lease and a board's type come
// from the lease service and the configuration; it follows every run's end
// (and, through the run routes, its start).
void Daemon::Impl::openRunIndex() {
  RunIndex::Lookups lookups;
  lookups.holder = [this](const std::string& lease_id) -> std::optional<lease::Holder> {
    const lease::Lease* l = leases->scheduler().lease(lease_id);
    return l ? std::optional<lease::Holder>(l->holder) : std::nullopt;
  };
  lookups.board_type = [this](const std::string& board) {
    const config::BoardConfig* b = state.config->findBoard(board);
    return b ? b->type : std::string();
  };
  run_index = std::make_unique<RunIndex>(*db, std::move(lookups));
  run_index->catchUp();
  runs->onRunEnded([this](const run::Record& run) { run_index->runChanged(run); });
  uploads->publishDashboard(run_index.get()); // the bucket's copy of the dashboard
}

// Console, flash and power logs live as long as the lease history
// (leases.history_days) and never while their lease is active.
void Daemon::Impl::pruneLogs() {
  int64_t cutoff = leases->nowMs() - static_cast<int64_t>(state.config->leases.history_days * 86400000.0);
  std::set<std::string> active;
  for (const auto& [id, l] : leases->scheduler().leases())
    if (l.state == lease::LeaseState::active) active.insert(id);
  double days = state.config->leases.history_days;
  runs->pruneOld();
  run_index->prune(leases->nowMs() - static_cast<int64_t>(state.config->runs.history_days * 86400000.0));
  boards->pruneLogs(cutoff, std::move(active), [days](size_t removed) {
    if (removed > 0) spdlog::info("removed the logs of {} lease(s) older than leases.history_days = {}", removed, days);
  });
  prune_timer.expires_after(std::chrono::hours(1));
  prune_timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopping) pruneLogs();
  });
}

void Daemon::Impl::beginStop(const char* why) {
  stopping = true;
  systemd::stopping();
  double timeout = state.config->agent.shutdown_timeout_s;
  spdlog::info("{}: stopping (waiting up to {} s for open requests)", why, timeout);
  watchdog_timer.cancel();
  prune_timer.cancel();
  health->stop(); // no check starts
  leases->stop(); // waiting lease requests get 503 now
  runs->stop();    // running runs are cancelled, their records say so
  sla->stop();
  uploads->stop(); // pending uploads resume at the next start
  boards->stop();  // console streams end
  presence->stop();
  usb.reset();
  stop_deadline.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  stop_deadline.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    spdlog::warn("shutdown deadline reached with {} connection(s) open: stopping now",
                 server->connectionCount());
    io.stop();
  });
  server->stop([this] {
    stop_deadline.cancel();
    signals.cancel();
  });
}

// SIGHUP: the config and tokens files are read and parsed on a thread of
// their own (a large file, or one that blocks, never stalls the loop); the
// result is applied on the loop by applyReload.
void Daemon::Impl::reload() {
  if (stopping) return;
  if (reload_job) {
    reload_again = true; // the file may have changed after the running reload read it
    spdlog::info("SIGHUP during a reload: reloading again once it is done");
    return;
  }
  systemd::reloading();
  std::string source = options.config_path.empty() ? config::kEmbeddedSimFleetName : options.config_path;
  spdlog::info("SIGHUP: reloading configuration from {}", source);
  auto job = std::make_shared<ReloadJob>();
  reload_job = job;
  reload_thread = std::thread([this, job, path = options.config_path] {
    PreparedReload prepared = prepareReload(path);
    std::lock_guard lock(job->mutex);
    job->finished = true;
    if (job->abandoned) return;
    asio::post(io, [this, prepared = std::move(prepared)]() mutable { applyReload(std::move(prepared)); });
  });
}

void Daemon::Impl::applyReload(PreparedReload prepared) {
  reload_thread.join(); // it has posted this and is returning
  reload_job.reset();
  if (stopping) return;
  Loaded& loaded = prepared.loaded;
  ConfigStatus& status = state.config_status;
  status.last_reload_at_ms = clock.wallMs();
  status.last_reload_errors.clear();
  status.last_reload_restart_needed.clear();
  status.last_reload_ok = loaded.result.ok();
  if (!loaded.result.ok()) {
    for (const auto& e : loaded.result.errors) {
      spdlog::error("{}", e.format());
      status.last_reload_errors.push_back(e.format());
    }
    spdlog::error("reload failed with {} error(s); keeping configuration generation {}",
                  loaded.result.errors.size(), status.generation);
    systemd::ready("reload failed; serving configuration generation " + std::to_string(status.generation));
  } else {
    config::FleetConfig next = std::move(*loaded.result.config);
    const config::FleetConfig& previous = *state.config;
    // What only a restart can change keeps its running value, so that no
    // part of the daemon moves while another stays (the database cannot
    // move under open leases).
    if (!sameListen(previous.agent, next.agent)) {
      status.last_reload_restart_needed.push_back(
          "agent.listen changed: the daemon keeps listening where it does until it is restarted");
      next.agent.listen = previous.agent.listen;
    }
    if (previous.agent.state_dir != next.agent.state_dir) {
      status.last_reload_restart_needed.push_back(
          "agent.state_dir changed from " + config::quoteForMessage(previous.agent.state_dir) + " to " +
          config::quoteForMessage(next.agent.state_dir) +
          ": nothing moves until hwfarmd is restarted (database, consoles and board work directories stay in " +
          config::quoteForMessage(previous.agent.state_dir) + ")");
      next.agent.state_dir = previous.agent.state_dir;
    }
    for (const auto& note : status.last_reload_restart_needed) spdlog::warn("{}", note);
    auto applied = std::make_shared<const config::FleetConfig>(std::move(next));
    if (!applied->agent.tokens_file.empty())
      spdlog::info("{} token(s) loaded from {}", prepared.tokens.size(), applied->agent.tokens_file);
    setLogLevel(applied->agent.log_level);
    server->setLimits(applied->limits);
    if (prepared.tls) { // new connections get it; open ones keep theirs
      logTls(*prepared.tls, status.last_reload_at_ms);
      server->setTlsIdentity(prepared.tls);
    }
    auth.setTokens(prepared.tokens);
    auth.setAnonymousLoopback(applied->agent.anonymous_loopback);
    state.config = applied;
    sla->reconfigure(*applied); // agent.tier, [sla], sla.pin_tier
    boards->reconfigure(*applied);
    targets->reconfigure(*applied);
    runs->reconfigure(*applied);
    uploads->configure(*applied, std::move(prepared.upload_credentials));
    leases->reconfigure(*applied);
    health->reconfigure(*applied);
    presence->watch(watchedPaths(*applied));
    if (usb) usbChanged();
    status.generation += 1;
    status.source = applied->source;
    status.sha256 = prepared.sha256;
    status.loaded_at_ms = status.last_reload_at_ms;
    spdlog::info("configuration generation {} loaded: {}", status.generation, summary(*applied));
    systemd::ready("serving " + summary(*applied));
  }
  if (reload_again) {
    reload_again = false;
    reload();
  }
}

// Boards without an explicit console path are present while USB discovery
// finds a device matching their usb table.
void Daemon::Impl::usbChanged() {
  auto devices = usb->devices();
  drivers::BoardMatch match = drivers::matchBoards(*state.config, devices);
  refreshTtys(match);
  state.unclaimed.clear();
  for (const auto& d : match.unclaimed) {
    char v[5], p[5];
    std::snprintf(v, sizeof v, "%04x", d.vendor);
    std::snprintf(p, sizeof p, "%04x", d.product);
    state.unclaimed.push_back({v, p, d.serial, d.port, d.tty, drivers::boardSnippet(d)});
  }
  for (const auto& w : state.config->workers)
    for (const auto& b : w.boards) {
      if (b.driver != "usb" || b.serial.port != "auto") continue;
      bool now = match.boards.count(b.name) > 0;
      auto it = usb_present.find(b.name);
      if (it != usb_present.end() && it->second == now) continue;
      usb_present[b.name] = now;
      leases->presence(b.name, now);
    }
}

// Console ttys of matched USB boards, looked up again through udev (a tty can
// bind after its USB device arrived).
void Daemon::Impl::refreshTtys(const drivers::BoardMatch& match) {
  std::lock_guard lock(tty_mutex);
  ttys.clear();
  usb_ports.clear();
  for (const auto& [board, device] : match.boards) {
    ttys[board] = device.tty.empty() ? usb->ttyOf(device.port) : device.tty;
    usb_ports[board] = device.port;
  }
}

void Daemon::Impl::pingWatchdog() {
  systemd::watchdog();
  watchdog_timer.expires_after(*watchdog_interval);
  watchdog_timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopping) pingWatchdog();
  });
}

Daemon::Daemon(DaemonOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Daemon::~Daemon() = default;
int Daemon::run() { return impl_->run(); }

} // namespace hwfarm
