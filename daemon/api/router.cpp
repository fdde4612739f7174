#include "daemon/api/router.h"

#include "config/echo.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "daemon/api/json_codec.h"
#include "daemon/api/json_writer.h"
#include "daemon/api/metrics.h"
#include "daemon/services/image_store.h"

namespace hwfarm::api {
namespace json = boost::json;
using config::Role;

HttpResponse jsonError(int status, const std::string& error, const std::string& detail) {
  HttpResponse r;
  r.status = status;
  JsonWriter w;
  w.beginObject().member("error", error).member("detail", detail).endObject();
  r.body = w.take();
  return r;
}

bool Target::has(const std::string& key) const {
  for (const auto& [k, v] : query)
    if (k == key) return true;
  return false;
}

Target parseTarget(const std::string& target) {
  Target t;
  size_t q = target.find('?');
  t.path = target.substr(0, q);
  t.segments.reserve(6);
  for (size_t start = 1; start <= t.path.size();) {
    size_t slash = t.path.find('/', start);
    if (slash == std::string::npos) slash = t.path.size();
    if (slash > start) t.segments.push_back(t.path.substr(start, slash - start));
    start = slash + 1;
  }
  if (q == std::string::npos) return t;
  std::string rest = target.substr(q + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t amp = rest.find('&', start);
    std::string item = rest.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!item.empty()) {
      size_t eq = item.find('=');
      t.query.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return t;
}

namespace {

HttpResponse okText(std::string body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ok(const json::value& body, int status = 200) { return okText(toJson(body), status); }

// A value from the request (a path, an id from the URL) in a message:
// escaped and bounded (config/echo.h).
std::string echoed(std::string_view s) { return config::echo(s); }

// "application/octet-stream", with or without parameters, in any case.
bool isOctetStream(const std::string& content_type) {
  std::string type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  return type == "application/octet-stream";
}

std::string percentDecode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    auto digit = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    if (text[i] == '%' && i + 2 < text.size() && digit(text[i + 1]) && digit(text[i + 2])) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

// The uploaded image's original file name (?name=, percent-encoded), or "".
std::string uploadName(const Target& target) {
  for (const auto& [k, v] : target.query)
    if (k == "name") return percentDecode(v);
  return {};
}

// An answer channel that keeps the answer: refusals made from a request's
// head, which the server sends in place of reading the body.
class Captured : public Exchange {
 public:
  bool respond(HttpResponse r) override {
    if (response) return false;
    response = std::move(r);
    return true;
  }
  void onClientGone(std::function<void()>) override {}
  std::optional<HttpResponse> response;
};

HttpResponse withAllow(HttpResponse r, const std::string& allow) {
  r.headers.emplace_back("Allow", allow);
  return r;
}

// The answer channel of one call, counting the answers sent by status. Handlers that
// answer later capture a copy (no allocation per copy).
class Reply {
 public:
  Reply() = default;
  Reply(std::shared_ptr<Exchange> exchange, std::map<int, uint64_t>* counts)
      : exchange_(std::move(exchange)), counts_(counts) {}
  void operator()(HttpResponse r) const {
    int status = r.status;
    if (exchange_->respond(std::move(r))) ++(*counts_)[status]; // answers actually sent
  }
  const std::shared_ptr<Exchange>& exchange() const { return exchange_; }

 private:
  std::shared_ptr<Exchange> exchange_;
  std::map<int, uint64_t>* counts_ = nullptr;
};

} // namespace

struct Router::Call {
  HttpRequest request;
  Target target;
  Reply respond;
  std::optional<Principal> principal;

  // Answers 401/403 unless the caller has at least `role`.
  bool allowed(Role role) {
    if (!principal) {
      HttpResponse r = jsonError(401, "unauthorized",
                                 request.authorization.empty()
                                     ? "this endpoint needs a bearer token (Authorization: Bearer TOKEN)"
                                     : "the bearer token is not valid");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      respond(r);
      return false;
    }
    if (!hasRole(*principal, role)) {
      respond(jsonError(403, "forbidden",
                        "role " + std::string(config::toString(principal->role)) + " of \"" + principal->name +
                            "\" may not " + request.method + " " + config::echo(target.path) + " (needs " +
                            config::toString(role) +
                            ")"));
      return false;
    }
    return true;
  }
};

void Router::handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  Call call;
  call.target = parseTarget(request.target);
  call.request = std::move(request);
  call.respond = Reply(std::move(exchange), &responses_);
  // A handler that throws (a filesystem or database call on a full or
  // read-only disk, a failed digest) fails its request, not the daemon.
  try {
    call.principal = auth_.authenticate(call.request.authorization, call.request.local_peer);
    route(call);
  } catch (const std::exception& e) {
    spdlog::error("{} {} failed: {}", call.request.method, call.target.path, e.what());
    call.respond(jsonError(500, "internal_error", e.what()));
  }
}

void Router::route(Call& c) {
  const auto& s = c.target.segments;
  const std::string& m = c.request.method;
  // Lease ids and board names come from the path. (Beast refuses control
  // characters in a request line; this holds for any other caller too.)
  if (size_t at = config::findControlCharacter(c.target.path); at != std::string::npos) {
    char code[8];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned char>(c.target.path[at]));
    return c.respond(jsonError(400, "invalid_request", std::string("path: contains the control character ") + code +
                                                           " at byte " + std::to_string(at)));
  }
  auto method = [&](const char* allowed) {
    if (m == allowed) return true;
    c.respond(withAllow(jsonError(405, "method_not_allowed", echoed(m) + " is not allowed on " + echoed(c.target.path)), allowed));
    return false;
  };
  if (s.size() == 1 && s[0] == "metrics") {
    if (method("GET") && c.allowed(Role::viewer)) metrics(c);
    return;
  }
  if (s.size() >= 2 && s[0] == "v1") {
    if (s.size() == 2 && s[1] == "healthz") {
      if (method("GET")) healthz(c);
      return;
    }
    if (s.size() == 2 && s[1] == "boards") {
      if (method("GET") && c.allowed(Role::viewer)) boards(c);
      return;
    }
    if (s.size() == 4 && s[1] == "boards" && (s[3] == "maintenance" || s[3] == "resume")) {
      if (method("POST") && c.allowed(Role::operator_)) boardAction(c, s[2], s[3]);
      return;
    }
    if (s.size() == 2 && s[1] == "queue") {
      if (method("GET") && c.allowed(Role::viewer)) queue(c);
      return;
    }
    if (s.size() == 2 && s[1] == "leases") {
      if (m == "GET") {
        if (c.allowed(Role::viewer)) listLeases(c);
      } else if (m == "POST") {
        if (c.allowed(Role::pipeline)) acquire(c);
      } else {
        c.respond(withAllow(jsonError(405, "method_not_allowed", echoed(m) + " is not allowed on " + echoed(c.target.path)),
                            "GET, POST"));
      }
      return;
    }
    if (s.size() == 3 && s[1] == "leases") {
      if (m == "GET") {
        if (c.allowed(Role::viewer)) showLease(c, s[2]);
      } else if (m == "DELETE") {
        if (c.allowed(Role::pipeline)) release(c, s[2]);
      } else {
        c.respond(withAllow(jsonError(405, "method_not_allowed", echoed(m) + " is not allowed on " + echoed(c.target.path)),
                            "GET, DELETE"));
      }
      return;
    }
    if (s.size() == 6 && s[1] == "leases" && s[3] == "boards" &&
        (s[5] == "flash" || s[5] == "power" || s[5] == "console")) {
      if (method(s[5] == "console" ? "GET" : "POST") && c.allowed(Role::pipeline)) boardOperation(c, s[2], s[4], s[5]);
      return;
    }
    if (s.size() == 4 && s[1] == "leases" && s[3] == "renew") {
      if (method("POST") && c.allowed(Role::pipeline)) renew(c, s[2]);
      return;
    }
  }
  c.respond(jsonError(404, "not_found", "no such endpoint: " + echoed(c.target.path)));
}

void Router::healthz(Call& c) {
  const auto& cs = state_.config_status;
  json::array errors;
  for (const auto& e : cs.last_reload_errors) errors.emplace_back(e);
  json::array restart_needed;
  for (const auto& n : cs.last_reload_restart_needed) restart_needed.emplace_back(n);
  json::object body{
      {"status", "ok"},
      {"agent", state_.config->agent.name},
      {"version", state_.version},
      {"pid", static_cast<int64_t>(::getpid())},
      {"registered_tier", state_.config->agent.tier},
      {"effective_tier", state_.effective_tier},
      {"tier_since", rfc3339(state_.tier_since_ms)},
      {"started_at", rfc3339(state_.started_at_ms)},
      {"config",
       json::object{{"generation", cs.generation},
                    {"source", cs.source},
                    {"sha256", cs.sha256},
                    {"loaded_at", rfc3339(cs.loaded_at_ms)},
                    {"workers", state_.config->workers.size()},
                    {"boards", state_.config->boardCount()},
                    {"last_reload",
                     json::object{{"at", cs.last_reload_at_ms ? json::value(rfc3339(cs.last_reload_at_ms)) : json::value(nullptr)},
                                  {"ok", cs.last_reload_ok},
                                  {"errors", errors},
                                  {"restart_needed", restart_needed}}}}},
  };
  c.respond(ok(body));
}

void Router::metrics(Call& c) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = renderMetrics(state_, leases_, responses_);
  c.respond(r);
}

void Router::boards(Call& c) {
  json::array list;
  const auto& scheduler = leases_.scheduler();
  for (const auto& worker : state_.config->workers)
    for (const auto& board : worker.boards) list.push_back(boardJson(worker, board, scheduler.board(board.name)));
  json::object body{{"boards", std::move(list)}};
  if (c.target.has("all")) {
    // Devices of a configured vendor:product that no board claims.
    json::array unclaimed;
    for (const auto& d : state_.unclaimed)
      unclaimed.push_back(json::object{{"vendor", d.vendor}, {"product", d.product}, {"serial", d.serial},
                                       {"port", d.port}, {"tty", d.tty}, {"snippet", d.snippet}});
    body["unclaimed"] = std::move(unclaimed);
    body["usb_discovery"] = state_.usb_discovery;
  }
  c.respond(ok(body));
}

void Router::boardAction(Call& c, const std::string& name, const std::string& action) {
  std::string error;
  auto reason = parseReason(c.request.body, &error);
  if (!reason) return c.respond(jsonError(400, "invalid_request", error));
  if (!leases_.scheduler().board(name)) return c.respond(jsonError(404, "not_found", "no board " + echoed(name)));
  auto respond = c.respond;
  auto done = [this, respond, name](lease::OpResult r) {
    if (r.status == lease::OpStatus::not_found) return respond(jsonError(404, "not_found", r.detail));
    if (r.status != lease::OpStatus::ok) return respond(jsonError(409, "conflict", r.detail));
    // A reload may have removed the board while the change was committed.
    const lease::Board* b = leases_.scheduler().board(name);
    if (!b) return respond(jsonError(404, "not_found", "board " + name + " was removed from the configuration"));
    respond(ok(json::object{{"name", name}, {"state", lease::toString(b->state)}, {"reason", b->reason}}));
  };
  if (action == "maintenance") {
    std::string text = reason->empty() ? "maintenance by " + c.principal->name : *reason + " (" + c.principal->name + ")";
    leases_.maintenance(name, text, done);
  } else {
    leases_.resume(name, done);
  }
}

void Router::queue(Call& c) {
  JsonWriter w;
  w.beginObject().key("queue").beginArray();
  int64_t now = leases_.nowMs();
  size_t position = 0;
  for (const lease::LeaseRequest* r : leases_.scheduler().queue(now))
    writeQueueEntry(w, *r, ++position, now, static_cast<int64_t>(state_.config->leases.aging_s * 1000));
  w.endArray().endObject();
  c.respond(okText(w.take()));
}

void Router::listLeases(Call& c) {
  bool all = c.target.has("all");
  // Oldest grant first.
  std::vector<const lease::Lease*> list;
  for (const auto& [id, l] : leases_.scheduler().leases())
    if (all || l.state == lease::LeaseState::active) list.push_back(&l);
  std::sort(list.begin(), list.end(), [](const lease::Lease* a, const lease::Lease* b) {
    return a->granted_ms != b->granted_ms ? a->granted_ms < b->granted_ms : a->id < b->id;
  });
  JsonWriter w;
  w.beginObject().key("leases").beginArray();
  for (const lease::Lease* l : list) writeLease(w, *l, leases_.scheduler());
  w.endArray().endObject();
  c.respond(okText(w.take()));
}

void Router::showLease(Call& c, const std::string& id) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) return c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
  c.respond(okText(leaseJson(*l, leases_.scheduler())));
}

void Router::acquire(Call& c) {
  std::string error;
  auto parsed = parseAcquire(c.request.body, state_.config->limits, state_.config->leases, &error);
  if (!parsed) return c.respond(jsonError(400, "invalid_request", error));
  lease::LeaseRequest& r = parsed->request;
  r.holder.principal = c.principal->name;
  // A retry of a request that was admitted gets its lease (or rejoins its
  // wait) even if the tier changed since.
  bool retry = !r.idempotency_key.empty() && leases_.scheduler().knowsKey(r.holder.principal, r.idempotency_key);
  if (!retry && !lease::tierServes(state_.effective_tier, r.context)) {
    HttpResponse refused = jsonError(
        409, "tier_refused",
        "this agent serves tier " + std::to_string(state_.effective_tier) + " since " +
            rfc3339(state_.tier_since_ms) + ", which does not take \"" + lease::toString(r.context) + "\" requests");
    json::object body = json::parse(refused.body).as_object();
    body["effective_tier"] = state_.effective_tier;
    body["registered_tier"] = state_.config->agent.tier;
    body["since"] = rfc3339(state_.tier_since_ms);
    refused.body = toJson(body);
    return c.respond(refused);
  }
  auto respond = c.respond;
  double wait_s = static_cast<double>(parsed->wait_ms) / 1000.0;
  lease::Selector selector = r.selector;
  leases_.acquire(
      std::move(r), parsed->wait_ms,
      [this, respond, wait_s, selector](const AcquireOutcome& o) {
        using K = AcquireOutcome::Kind;
        switch (o.kind) {
          case K::granted: return respond(okText(leaseJson(o.lease, leases_.scheduler()), 201));
          case K::existing: return respond(okText(leaseJson(o.lease, leases_.scheduler()), 200));
          case K::timeout: {
            std::ostringstream detail;
            detail << "no matching board was free within wait_s = " << wait_s;
            json::object body{{"error", "wait_timeout"}, {"detail", detail.str()}, {"queue_position", o.position}};
            return respond(ok(body, 408));
          }
          case K::unsatisfiable: {
            JsonWriter w;
            w.beginObject().member("error", "unsatisfiable").member("detail", o.detail).key("selector");
            writeSelector(w, selector);
            w.endObject();
            return respond(okText(w.take(), 422));
          }
          case K::queue_full: return respond(jsonError(503, "queue_full", o.detail));
          case K::shutting_down: return respond(jsonError(503, "shutting_down", o.detail));
        }
      },
      [exchange = c.respond.exchange()](std::function<void()> hook) { exchange->onClientGone(std::move(hook)); });
}

void Router::renew(Call& c, const std::string& id) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) return c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
  if (!hasRole(*c.principal, Role::operator_) && l->holder.principal != c.principal->name)
    return c.respond(jsonError(403, "forbidden", "lease " + id + " belongs to \"" + l->holder.principal + "\""));
  std::string error;
  auto ttl = parseRenew(c.request.body, state_.config->limits, l->ttl_ms, &error);
  if (!ttl) return c.respond(jsonError(400, "invalid_request", error));
  auto respond = c.respond;
  leases_.renew(id, *ttl, [this, respond](lease::OpResult r) {
    if (r.status == lease::OpStatus::not_active) {
      JsonWriter w;
      w.beginObject().member("error", "not_active").member("detail", r.detail).key("lease");
      writeLease(w, r.lease, leases_.scheduler());
      w.endObject();
      return respond(okText(w.take(), 409));
    }
    respond(okText(leaseJson(r.lease, leases_.scheduler())));
  });
}

void Router::release(Call& c, const std::string& id) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) return c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
  bool own = l->holder.principal == c.principal->name;
  if (!own && !hasRole(*c.principal, Role::operator_))
    return c.respond(jsonError(403, "forbidden", "lease " + id + " belongs to \"" + l->holder.principal + "\""));
  // Releasing an ended lease is a no-op answer: a retried DELETE succeeds.
  if (l->state != lease::LeaseState::active) {
    // Answered once the end it reports is committed.
    auto respond = c.respond;
    return leases_.whenCommitted(
        [this, respond, ended = *l] { respond(okText(leaseJson(ended, leases_.scheduler()))); });
  }
  auto respond = c.respond;
  auto done = [this, respond](const lease::OpResult& r) { respond(okText(leaseJson(r.lease, leases_.scheduler()))); };
  if (own) leases_.release(id, done);
  else leases_.revoke(id, "force-released by operator \"" + c.principal->name + "\"", done);
}

namespace {

// The answer to a flash or power operation; `extra` adds members (the image).
void answerOperation(const Reply& respond, const std::string& board, const drivers::Status& status, double seconds,
                     const std::string& log, const json::object& extra = {}) {
  if (status.busy) return respond(jsonError(409, "busy", status.message));
  if (status.unsupported) return respond(jsonError(409, "not_supported", status.message));
  if (!status.ok) {
    json::object body{{"error", "infrastructure_failure"}, {"detail", status.message}, {"board", board}};
    if (!log.empty()) body["log"] = log;
    return respond(ok(body, 502));
  }
  json::object body{{"board", board}, {"ok", true}, {"ms", static_cast<int64_t>(seconds * 1000)}};
  if (!log.empty()) body["log"] = log;
  for (const auto& [k, v] : extra) body[k] = v;
  respond(ok(body));
}

} // namespace

BodyPlan Router::planBody(const HttpRequest& head) {
  BodyPlan plan;
  if (head.method != "POST" || !isOctetStream(head.content_type)) return plan;
  Target target = parseTarget(head.target);
  const auto& s = target.segments;
  if (s.size() != 6 || s[0] != "v1" || s[1] != "leases" || s[3] != "boards" || s[5] != "flash") return plan;
  // What the route would answer, answered before the body arrives.
  auto captured = std::make_shared<Captured>();
  Call call;
  call.principal = auth_.authenticate(head.authorization, head.local_peer);
  call.target = target;
  call.request = head;
  call.respond = Reply(captured, &responses_);
  auto refuse = [&] {
    plan.kind = BodyPlan::Kind::refuse;
    plan.refusal = std::move(*captured->response);
    return plan;
  };
  if (!call.allowed(Role::pipeline)) return refuse();
  const lease::Lease* l = leaseForBoard(call, s[2], s[4]);
  if (!l) return refuse();
  std::string error;
  if (imageExtension(uploadName(target), &error).empty()) {
    call.respond(jsonError(400, "invalid_request", error));
    return refuse();
  }
  if (!boards_.makeImageDir(l->id, &error)) {
    call.respond(jsonError(500, "storage_error", error));
    return refuse();
  }
  plan.kind = BodyPlan::Kind::file;
  plan.limit = static_cast<uint64_t>(state_.config->limits.max_image_bytes);
  plan.limit_name = "limits.max_image_bytes";
  plan.dir = boards_.imageDir(l->id);
  return plan;
}

const lease::Lease* Router::leaseForBoard(Call& c, const std::string& id, const std::string& board) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) {
    c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
    return nullptr;
  }
  if (!hasRole(*c.principal, Role::operator_) && l->holder.principal != c.principal->name) {
    c.respond(jsonError(403, "forbidden", "lease " + id + " belongs to \"" + l->holder.principal + "\""));
    return nullptr;
  }
  if (l->state != lease::LeaseState::active) {
    c.respond(jsonError(409, "not_active", "lease " + id + " is " + lease::toString(l->state)));
    return nullptr;
  }
  auto member = std::find_if(l->boards.begin(), l->boards.end(), [&](const auto& b) { return b.name == board; });
  if (member == l->boards.end()) {
    c.respond(jsonError(404, "not_found", "board " + echoed(board) + " is not in lease " + id));
    return nullptr;
  }
  if (member->lost) {
    c.respond(jsonError(409, "board_lost", "board " + board + " left while leased"));
    return nullptr;
  }
  return l;
}

void Router::flash(Call& c, const lease::Lease& lease, const std::string& board) {
  auto respond = c.respond;
  std::string log = boards_.flashLogPath(lease.id, board);
  auto done = [respond, board, log](json::object image) {
    return [respond, board, log, image](drivers::Status s, double seconds) {
      answerOperation(respond, board, s, seconds, log, json::object{{"image", image}});
    };
  };
  std::string error;
  if (const auto& upload = c.request.upload) {
    // The image came in the body, already spooled into the lease's store.
    std::string name = uploadName(c.target);
    std::string ext = imageExtension(name, &error);
    if (ext.empty()) return c.respond(jsonError(400, "invalid_request", error));
    std::string stored = storeUpload(upload->path, upload->sha256, boards_.imageDir(lease.id), ext, &error);
    if (stored.empty()) return c.respond(jsonError(500, "storage_error", "cannot store the upload: " + error));
    json::object image{{"sha256", upload->sha256}, {"bytes", upload->bytes}, {"name", sanitizeImageName(name)},
                       {"stored", stored}};
    return boards_.flash(lease, board, stored, done(image));
  }
  auto object = c.request.body.empty() ? std::optional<json::object>(json::object{}) : parseObject(c.request.body, &error);
  if (!object) return c.respond(jsonError(400, "invalid_request", error));
  const json::value* image = object->if_contains("image");
  if (!image || !image->is_string() || image->as_string().empty() || image->as_string()[0] != '/' ||
      object->size() != 1)
    return c.respond(jsonError(400, "invalid_request",
                               "expected the image as an application/octet-stream body, or "
                               "{\"image\": \"/absolute/path/under/agent.image_roots\"}"));
  std::string path(image->as_string());
  ServerImage file = openServerImage(path, state_.config->agent.image_roots,
                                     static_cast<uint64_t>(state_.config->limits.max_image_bytes));
  if (file.fd < 0) return c.respond(jsonError(file.http_status, file.error, file.detail));
  std::string ext = imageExtension(file.real_path, &error);
  if (ext.empty()) {
    ::close(file.fd);
    return c.respond(jsonError(400, "invalid_image", error));
  }
  boards_.flashCopy(lease, board, file.fd, ext, done(json::object{{"path", path}, {"bytes", file.bytes}}));
}

void Router::boardOperation(Call& c, const std::string& id, const std::string& board, const std::string& what) {
  const lease::Lease* l = leaseForBoard(c, id, board);
  if (!l) return;
  if (what == "flash") return flash(c, *l, board);
  lease::Lease lease = *l;
  auto respond = c.respond;
  std::string error;
  auto object = c.request.body.empty() ? std::optional<json::object>(json::object{}) : parseObject(c.request.body, &error);
  if (!object) return c.respond(jsonError(400, "invalid_request", error));
  if (what == "power") {
    const json::value* action = object->if_contains("action");
    std::string a = action && action->is_string() ? std::string(action->as_string()) : "";
    if ((a != "on" && a != "off" && a != "cycle") || object->size() != 1)
      return c.respond(jsonError(400, "invalid_request", "expected {\"action\": \"on\" | \"off\" | \"cycle\"}"));
    drivers::PowerAction pa = a == "on" ? drivers::PowerAction::on
                              : a == "off" ? drivers::PowerAction::off
                                           : drivers::PowerAction::cycle;
    boards_.power(lease, board, pa,
                  [respond, board](drivers::Status s, double seconds) { answerOperation(respond, board, s, seconds, ""); });
  } else {
    int64_t most = state_.config->limits.max_console_streams;
    if (boards_.consoleReaders(id) >= static_cast<size_t>(most))
      return c.respond(jsonError(429, "too_many_streams",
                                 "lease " + id + " already has " + std::to_string(most) +
                                     " console streams open (limits.max_console_streams); close one first"));
    HttpResponse r;
    r.content_type = "text/plain; charset=utf-8";
    BoardService* boards = &boards_;
    r.stream = [boards, lease, board, respond](std::shared_ptr<StreamSink> sink) {
      std::string error;
      auto cancel = std::make_shared<std::function<void()>>();
      BoardService::Reader reader{[sink](const std::string& text) { return sink->write(text); },
                                  [sink] { sink->end(); }, [sink] { return sink->queued(); },
                                  [sink](std::function<void()> on_drained) { sink->onDrained(std::move(on_drained)); }};
      if (!boards->readConsole(lease, board, reader, &error, cancel.get())) {
        sink->write("-- hwfarmd: " + error + " --\n");
        sink->end();
        return;
      }
      sink->onGone([cancel] {
        if (*cancel) (*cancel)();
      });
    };
    c.respond(r);
  }
}

} // namespace hwfarm::api
