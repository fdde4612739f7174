// Fuzz target: the HTTP request path without sockets. Each input is a short
// session of requests handed to api::Router::handle, as the server would
// hand them over, on real services (LeaseService with its SQLite store,
// BoardService) over a fresh state directory and an io_context run here.
// That covers parseTarget, the Authorization header, routing, the JSON body
// decoders and the handlers behind them.
//
// Input format (text, so seeds are readable; tests/fuzz/corpus/http_request):
//   METHOD TARGET\n
//   Header: value\n ...      Authorization: <value>  the header as sent
//                            Content-Type: <value>   (application/octet-stream:
//                                                    an image upload, spooled)
//                            Peer: local             a loopback/unix client
//                            Gone: yes               the client leaves if the
//                                                    answer is not there yet
//   \n
//   body ...
//   \n%%\n                   next request
// "$LEASE" in a target or body stands for the id of the last lease any
// answer showed (ids are random, a fuzzer cannot guess them).
//
// HWFARM_FUZZ_TRACE=1 prints each request and its answer (to read a crash
// input or write a seed).
//
// Invariants: every request is answered at most once, and once the services
// stop every request whose client stayed is answered; statuses are ones the
// API documents; JSON answers parse; 401 carries WWW-Authenticate; the
// router's response counts match the answers delivered; after every request
// a board is in at most one active lease; and a restart on the state dir
// finds every active lease with the same holder, boards and expiry.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "config/loader.h"
#include "config/tokens.h"
#include "daemon/api/agent_state.h"
#include "daemon/api/auth.h"
#include "daemon/api/router.h"
#include "daemon/services/board_service.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/system_clock.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;
namespace json = boost::json;

namespace {

constexpr size_t kMaxRequests = 16;
constexpr auto kAnswerBudget = std::chrono::milliseconds(500); // per request at most, then the next one goes in

// Records what the router answers, as the server's exchange would send it.
class CaptureExchange : public api::Exchange {
 public:
  bool respond(api::HttpResponse response) override {
    ++calls;
    if (answered || gone) return false;
    answered = true;
    this->response = std::move(response);
    return true;
  }
  void onClientGone(std::function<void()> hook) override { hooks.push_back(std::move(hook)); }
  void leave() {
    gone = true;
    auto run = std::move(hooks);
    hooks.clear();
    for (auto& h : run) h();
  }

  int calls = 0;
  bool answered = false;
  bool gone = false;
  api::HttpResponse response;
  std::vector<std::function<void()>> hooks;
};

// A streamed body (the console), collected.
class CaptureSink : public api::StreamSink {
 public:
  bool write(std::string data) override {
    FUZZ_CHECK(!ended, "stream written after its end");
    text += data;
    return text.size() < 65536;
  }
  void end() override { ended = true; }
  void onGone(std::function<void()> hook) override { gone_hook = std::move(hook); }
  // Everything written counts as sent at once.
  size_t queued() const override { return 0; }
  void onDrained(std::function<void()> hook) override { drained_hook = std::move(hook); }

  std::string text;
  bool ended = false;
  std::function<void()> gone_hook;
  std::function<void()> drained_hook;
};

struct Request {
  api::HttpRequest http;
  bool leave = false;
};

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  if (to.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::vector<Request> parseSession(std::string_view in) {
  std::vector<Request> out;
  while (!in.empty() && out.size() < kMaxRequests) {
    size_t end = in.find("\n%%\n");
    std::string_view one = in.substr(0, end);
    in = end == std::string_view::npos ? std::string_view() : in.substr(end + 4);
    Request r;
    size_t nl = one.find('\n');
    std::string_view line = one.substr(0, nl);
    one = nl == std::string_view::npos ? std::string_view() : one.substr(nl + 1);
    size_t sp = line.find(' ');
    r.http.method = std::string(line.substr(0, sp));
    r.http.target = sp == std::string_view::npos ? "" : std::string(line.substr(sp + 1));
    while (!one.empty()) {
      nl = one.find('\n');
      std::string_view header = one.substr(0, nl);
      one = nl == std::string_view::npos ? std::string_view() : one.substr(nl + 1);
      if (header.empty()) break;
      if (header.rfind("Authorization: ", 0) == 0) r.http.authorization = std::string(header.substr(15));
      else if (header == "Peer: local") r.http.local_peer = true;
      else if (header.rfind("Content-Type: ", 0) == 0) r.http.content_type = std::string(header.substr(14));
      else if (header == "Gone: yes") r.leave = true;
    }
    r.http.body = std::string(one);
    out.push_back(std::move(r));
  }
  return out;
}

// The id of a lease shown in an answer: {"id": ...} or {"lease": {"id": ...}}.
std::string leaseIdIn(const json::value& v) {
  if (!v.is_object()) return "";
  const json::object& o = v.as_object();
  if (auto* lease = o.if_contains("lease")) return leaseIdIn(*lease);
  if (auto* id = o.if_contains("id"); id && id->is_string() && o.contains("boards")) return std::string(id->as_string());
  if (auto* leases = o.if_contains("leases"); leases && leases->is_array() && !leases->as_array().empty())
    return leaseIdIn(leases->as_array().back());
  return "";
}

struct World {
  std::string root;    // per-process scratch directory
  std::string tty[2];        // ptys' slaves: consoles that exist
  int pty_master[2] = {-1, -1}; // kept open so the slaves stay usable
};

// Made once per process, never destroyed: the exit handler that removes the
// scratch directory needs it.
World& world() {
  static World* w = [] {
    auto* w = new World;
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/hwfarm-fuzz-http.XXXXXX";
    FUZZ_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    w->root = tmpl;
    for (int i = 0; i < 2; ++i) {
      int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      FUZZ_CHECK(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0, "no pty");
      w->pty_master[i] = m;
      w->tty[i] = ptsname(m);
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(world().root, ec);
    });
    return w;
  }();
  return *w;
}

std::string fleetText(const World& w, const std::string& state_dir) {
  auto usbBoard = [](const std::string& name, const std::string& type, const std::string& port) {
    return "  [[worker.board]]\n  name = \"" + name + "\"\n  type = \"" + type +
           "\"\n  labels = [\"stm32\", \"" + name + "\"]\n  usb = { vendor = \"0483\", product = \"374b\", serial = \"S-" +
           name + "\" }\n  serial = { port = \"" + port + "\" }\n";
  };
  return "[agent]\nname = \"fuzz-lab\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"" + state_dir + "\"\nlock_dir = \"" +
         state_dir + "\"\ntier = 2\nanonymous = \"loopback\"\n"
         "[limits]\nmax_wait_s = 0.2\nmax_queue = 8\nmax_count = 4\n"
         "[leases]\nrecovery_s = 0\ndefault_ttl_s = 60\n"
         "[[worker]]\nname = \"w0\"\n" +
         usbBoard("b0", "nucleo", w.tty[0]) + usbBoard("b1", "nucleo", state_dir + "/no-such-tty") +
         "[[worker]]\nname = \"w1\"\n" + usbBoard("b2", "disco", w.tty[1]);
}

bool knownStatus(int s) {
  static const std::set<int> known{200, 201, 400, 401, 403, 404, 405, 408, 409, 413, 422, 500, 502, 503};
  return known.count(s) != 0;
}

void checkAnswer(const CaptureExchange& x, const Request& r) {
  FUZZ_CHECK(x.calls <= 1, "%s %s answered %d times", r.http.method.c_str(), r.http.target.c_str(), x.calls);
  if (!x.answered) return;
  const api::HttpResponse& a = x.response;
  FUZZ_CHECK(knownStatus(a.status), "status %d for %s %s", a.status, r.http.method.c_str(), r.http.target.c_str());
  if (a.status == 401) {
    bool challenge = false;
    for (const auto& [k, v] : a.headers) challenge |= k == "WWW-Authenticate";
    FUZZ_CHECK(challenge, "401 without WWW-Authenticate");
  }
  if (a.content_type == "application/json" && !a.stream) {
    // Strict: every answer is valid UTF-8 JSON, whatever the request held
    // (issue 9 item 10).
    boost::system::error_code ec;
    json::value v = json::parse(a.body, ec);
    FUZZ_CHECK(!ec, "status %d body is not JSON (%s): %s", a.status, ec.message().c_str(), a.body.c_str());
  }
}

// A board is in at most one active lease, and says it is leased to it.
void checkOneLeasePerBoard(const lease::Scheduler& s) {
  std::map<std::string, std::string> lease_of;
  for (const auto& [id, l] : s.leases()) {
    if (l.state != lease::LeaseState::active) continue;
    for (const auto& b : l.boards) {
      auto [it, fresh] = lease_of.emplace(b.name, id);
      FUZZ_CHECK(fresh, "board %s is in active leases %s and %s", b.name.c_str(), it->second.c_str(), id.c_str());
      if (b.lost) continue;
      const lease::Board* board = s.board(b.name);
      FUZZ_CHECK(board && board->state == lease::BoardState::leased && board->lease_id == id,
                 "board %s of active lease %s is %s (lease \"%s\")", b.name.c_str(), id.c_str(),
                 board ? lease::toString(board->state) : "gone", board ? board->lease_id.c_str() : "");
    }
  }
}

// After a restart on the same state dir, every lease that was active (and
// has not expired since) is active again with the same holder, boards and
// expiry.
void checkRestart(const config::FleetConfig& config, const std::vector<lease::Lease>& before, bool trace) {
  boost::asio::io_context io;
  SystemClock clock;
  LeaseService restarted(io, config, clock);
  int64_t now = restarted.nowMs();
  size_t compared = 0;
  for (const lease::Lease& l : before) {
    if (l.expires_ms < now + 2000) continue; // may have expired in between
    ++compared;
    const lease::Lease* r = restarted.scheduler().lease(l.id);
    FUZZ_CHECK(r && r->state == lease::LeaseState::active, "lease %s not active after a restart", l.id.c_str());
    FUZZ_CHECK(r->expires_ms == l.expires_ms, "lease %s expiry %lld became %lld", l.id.c_str(),
               static_cast<long long>(l.expires_ms), static_cast<long long>(r->expires_ms));
    FUZZ_CHECK(r->holder.principal == l.holder.principal, "lease %s principal changed", l.id.c_str());
    FUZZ_CHECK(r->boards.size() == l.boards.size(), "lease %s boards changed", l.id.c_str());
    for (size_t i = 0; i < l.boards.size(); ++i)
      FUZZ_CHECK(r->boards[i].name == l.boards[i].name, "lease %s board %zu changed", l.id.c_str(), i);
    for (auto [a, b] : {std::pair{&l.idempotency_key, &r->idempotency_key}, std::pair{&l.holder.job, &r->holder.job},
                        std::pair{&l.holder.url, &r->holder.url}})
      FUZZ_CHECK(*a == *b, "lease %s: \"%s\" stored as \"%s\"", l.id.c_str(), a->c_str(), b->c_str());
  }
  if (trace) std::fprintf(stderr, "restart: %zu active lease(s) found again\n", compared);
  restarted.stop();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  world();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Request> session = parseSession(std::string_view(reinterpret_cast<const char*>(data), size));
  if (session.empty()) return 0;
  World& w = world();
  static const bool trace = getenv("HWFARM_FUZZ_TRACE") != nullptr;
  std::string state_dir = w.root + "/state";
  std::filesystem::remove_all(state_dir);
  std::filesystem::create_directories(state_dir);

  config::LoadResult loaded = config::parseFleetConfig(fleetText(w, state_dir), "fuzz-fleet.toml");
  FUZZ_CHECK(loaded.ok(), "fuzz fleet does not load: %s", loaded.errors.at(0).format().c_str());
  AgentState state;
  state.config = std::make_shared<const config::FleetConfig>(std::move(*loaded.config));
  state.version = "fuzz";
  state.effective_tier = state.config->agent.tier;
  Authenticator auth;
  std::vector<config::Token> tokens;
  for (const char* role : {"viewer", "pipeline", "operator"})
    tokens.push_back({role, role[0] == 'v' ? config::Role::viewer : role[0] == 'p' ? config::Role::pipeline
                                                                                    : config::Role::operator_,
                      config::sha256Hex(std::string("secret-") + role)});
  tokens.push_back({"pipeline2", config::Role::pipeline, config::sha256Hex("secret-pipeline2")});
  auth.setTokens(tokens);
  auth.setAnonymousLoopback(true);

  std::vector<lease::Lease> active; // when the services stopped
  SystemClock clock;
  boost::asio::io_context io;
  std::vector<std::shared_ptr<CaptureExchange>> exchanges;
  std::vector<std::shared_ptr<CaptureSink>> sinks;
  {
    LeaseService leases(io, *state.config, clock);
    BoardService boards(io, *state.config, clock, [](const std::string&) { return std::string(); });
    leases.onLeaseEnded([&boards](const lease::Lease& l) { boards.leaseEnded(l); });
    // The USB boards' devices are there: offline -> recovering -> available.
    for (const char* b : {"b0", "b1", "b2"}) leases.presence(b, true);
    io.poll();
    api::Router router(state, leases, boards, auth);

    std::string last_lease;
    for (Request& r : session) {
      r.http.target = replaceAll(r.http.target, "$LEASE", last_lease);
      r.http.body = replaceAll(r.http.body, "$LEASE", last_lease);
      auto x = std::make_shared<CaptureExchange>();
      exchanges.push_back(x);
      // The server asks the router how to read the body from the head, and
      // answers a refusal without reading it; a body for a file (an image
      // upload) is spooled and hashed, as the server does.
      api::BodyPlan plan = router.planBody(r.http);
      if (plan.kind == api::BodyPlan::Kind::refuse) {
        x->respond(plan.refusal);
      } else if (plan.kind == api::BodyPlan::Kind::file && r.http.body.size() > plan.limit) {
        x->leave(); // the server answers 413 itself; the router never sees it
      } else {
        if (plan.kind == api::BodyPlan::Kind::file) {
          std::string path = plan.dir + "/.upload-fuzz";
          FILE* f = std::fopen(path.c_str(), "we");
          FUZZ_CHECK(f, "cannot spool an upload into the planned directory");
          FUZZ_CHECK(std::fwrite(r.http.body.data(), 1, r.http.body.size(), f) == r.http.body.size() &&
                         std::fclose(f) == 0,
                     "cannot write the spooled upload");
          r.http.upload = api::HttpRequest::Upload{path, config::sha256Hex(r.http.body), r.http.body.size()};
          r.http.body.clear();
        }
        router.handle(r.http, x);
      }
      // Until it is answered, or what it changed is committed (a long-poll
      // wait: the next request goes in while it waits).
      auto settled = std::make_shared<bool>(false);
      leases.whenCommitted([settled] { *settled = true; });
      auto deadline = std::chrono::steady_clock::now() + kAnswerBudget;
      while (!x->answered && !*settled && std::chrono::steady_clock::now() < deadline) {
        io.restart();
        io.run_one_for(std::chrono::milliseconds(1));
      }
      if (!x->answered && r.leave) x->leave();
      io.restart();
      io.poll();
      checkAnswer(*x, r);
      if (trace)
        std::fprintf(stderr, "> %s %s [%s]\n< %d %.300s\n", r.http.method.c_str(), r.http.target.c_str(),
                     r.http.authorization.c_str(), x->answered ? x->response.status : 0,
                     x->answered ? x->response.body.c_str() : "(not answered yet)");
      if (x->answered && x->response.stream) {
        auto sink = std::make_shared<CaptureSink>();
        sinks.push_back(sink);
        // Moved out, as the server does: the stream holds the exchange.
        auto stream = std::move(x->response.stream);
        x->response.stream = nullptr;
        stream(sink);
        io.restart();
        io.poll();
        // The reader leaves after what was there.
        if (!sink->ended && sink->gone_hook) sink->gone_hook();
        if (trace) std::fprintf(stderr, "< stream: %.300s\n", sink->text.c_str());
      }
      checkOneLeasePerBoard(leases.scheduler());
      if (x->answered) {
        boost::system::error_code ec;
        json::value v = json::parse(x->response.body, ec);
        if (!ec)
          if (std::string id = leaseIdIn(v); !id.empty()) last_lease = id;
      }
    }
    // Shutdown as the daemon does it: waiting requests get their answer.
    leases.stop();
    boards.stop();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto pending = [&] {
      for (const auto& x : exchanges)
        if (!x->answered && !x->gone) return true;
      return false;
    };
    while (pending() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_one_for(std::chrono::milliseconds(5));
    }
    for (size_t i = 0; i < exchanges.size(); ++i) {
      checkAnswer(*exchanges[i], session[i]);
      FUZZ_CHECK(exchanges[i]->answered || exchanges[i]->gone, "request %zu (%s %s) never answered", i,
                 session[i].http.method.c_str(), session[i].http.target.c_str());
    }
    uint64_t counted = 0;
    for (const auto& [status, n] : router.responseCounts()) counted += n;
    uint64_t delivered = 0;
    for (const auto& x : exchanges) delivered += x->answered ? 1 : 0;
    FUZZ_CHECK(counted == delivered, "router counted %llu answers, %llu delivered",
               static_cast<unsigned long long>(counted), static_cast<unsigned long long>(delivered));
    // Everything changed so far committed, then the state a restart must find.
    auto committed = std::make_shared<bool>(false);
    leases.whenCommitted([committed] { *committed = true; });
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!*committed && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_one_for(std::chrono::milliseconds(5));
    }
    FUZZ_CHECK(*committed, "changes not committed within 5 s");
    checkOneLeasePerBoard(leases.scheduler());
    for (const auto& [id, l] : leases.scheduler().leases())
      if (l.state == lease::LeaseState::active) active.push_back(l);
    io.restart();
    io.poll();
    for (auto& x : exchanges) x->hooks.clear(); // they hold the exchange
  }
  // Handlers still queued belong to the services just destroyed: the
  // io_context drops them without running them, as the daemon's does; the
  // restart gets an io_context of its own.
  checkRestart(*state.config, active, trace);
  return 0;
}
