// Request dispatch: authentication, the route table, the flash route's body
// plan. The handlers (handlers.h) live by resource in routes_*.cpp.
#include "daemon/api/router.h"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "config/echo.h"
#include "daemon/api/json_writer.h"
#include "daemon/api/routes.h"

namespace hwfarm::api {
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

// "application/octet-stream", with or without parameters, in any case.
bool isOctetStream(const std::string& content_type) {
  std::string type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  return type == "application/octet-stream" || type == "application/x-tar";
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

// Answers 401/403 unless the caller has at least `role`.
bool allowed(Call& c, Role role) {
  if (!c.principal) {
    HttpResponse r = jsonError(401, "unauthorized",
                               c.request.authorization.empty()
                                   ? "this endpoint needs a bearer token (Authorization: Bearer TOKEN)"
                                   : "the bearer token is not valid");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    c.respond(r);
    return false;
  }
  if (!hasRole(*c.principal, role)) {
    c.respond(jsonError(403, "forbidden",
                        "role " + std::string(config::toString(c.principal->role)) + " of \"" + c.principal->name +
                            "\" may not " + c.request.method + " " + config::echo(c.target.path) + " (needs " +
                            config::toString(role) + ")"));
    return false;
  }
  return true;
}

} // namespace

void Router::handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  Call call(std::move(request), std::nullopt, Reply(std::move(exchange), &responses_));
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
  // The dashboard's files: public, GET only.
  if (s.empty() || (s.size() >= 2 && s[0] == "ui") || c.target.path == "/site.json") {
    if (method("GET")) handlers_.staticFile(c);
    return;
  }
  if (s.size() == 1 && s[0] == "metrics") {
    if (method("GET") && allowed(c, Role::viewer)) handlers_.metrics(c, responses_);
    return;
  }
  if (s.size() >= 2 && s[0] == "v1") {
    if (s.size() == 2 && s[1] == "healthz") {
      if (method("GET")) handlers_.healthz(c);
      return;
    }
    if (s.size() == 2 && s[1] == "whoami") {
      if (method("GET")) handlers_.whoami(c); // needs no token: it says whether one is needed
      return;
    }
    if (s.size() == 2 && s[1] == "boards") {
      if (method("GET") && allowed(c, Role::viewer)) handlers_.boards(c);
      return;
    }
    if (s.size() == 4 && s[1] == "boards" && (s[3] == "maintenance" || s[3] == "resume")) {
      if (method("POST") && allowed(c, Role::operator_)) handlers_.boardAction(c, s[2], s[3]);
      return;
    }
    if (s.size() == 3 && s[1] == "boards") {
      if (method("GET") && allowed(c, Role::viewer)) handlers_.board(c, s[2]);
      return;
    }
    if (s.size() == 4 && s[1] == "boards" && s[3] == "check") {
      if (method("POST") && allowed(c, Role::operator_)) handlers_.boardCheck(c, s[2]);
      return;
    }
    if (s.size() == 2 && s[1] == "queue") {
      if (method("GET") && allowed(c, Role::viewer)) handlers_.queue(c);
      return;
    }
    if (s.size() == 2 && (s[1] == "sla" || s[1] == "tier")) {
      if (method("GET") && allowed(c, Role::viewer)) s[1] == "sla" ? handlers_.sla(c) : handlers_.tier(c);
      return;
    }
    if (s.size() == 3 && s[1] == "tier" && (s[2] == "pin" || s[2] == "unpin")) {
      if (method("POST") && allowed(c, Role::operator_)) s[2] == "pin" ? handlers_.pinTier(c) : handlers_.unpinTier(c);
      return;
    }
    if (s.size() == 2 && s[1] == "leases") {
      if (m == "GET") {
        if (allowed(c, Role::viewer)) handlers_.listLeases(c);
      } else if (m == "POST") {
        if (allowed(c, Role::pipeline)) handlers_.acquire(c);
      } else {
        c.respond(withAllow(jsonError(405, "method_not_allowed", echoed(m) + " is not allowed on " + echoed(c.target.path)),
                            "GET, POST"));
      }
      return;
    }
    if (s.size() == 3 && s[1] == "leases") {
      if (m == "GET") {
        if (allowed(c, Role::viewer)) handlers_.showLease(c, s[2]);
      } else if (m == "DELETE") {
        if (allowed(c, Role::pipeline)) handlers_.release(c, s[2]);
      } else {
        c.respond(withAllow(jsonError(405, "method_not_allowed", echoed(m) + " is not allowed on " + echoed(c.target.path)),
                            "GET, DELETE"));
      }
      return;
    }
    if (s.size() == 6 && s[1] == "leases" && s[3] == "boards" &&
        (s[5] == "flash" || s[5] == "power" || s[5] == "console")) {
      if (method(s[5] == "console" ? "GET" : "POST") && allowed(c, Role::pipeline))
        handlers_.boardOperation(c, s[2], s[4], s[5]);
      return;
    }
    if (s.size() == 4 && s[1] == "leases" && s[3] == "images") {
      if (method("POST") && allowed(c, Role::pipeline)) handlers_.uploadImage(c, s[2]);
      return;
    }
    if (s.size() == 4 && s[1] == "leases" && s[3] == "results") {
      if (method("POST") && allowed(c, Role::pipeline)) handlers_.publishResults(c, s[2]);
      return;
    }
    if (s.size() == 4 && s[1] == "leases" && s[3] == "runs") {
      if (method("POST") && allowed(c, Role::pipeline)) handlers_.startRun(c, s[2]);
      return;
    }
    if (s.size() == 2 && (s[1] == "history" || s[1] == "compare")) {
      if (method("GET") && allowed(c, Role::viewer)) s[1] == "history" ? handlers_.history(c) : handlers_.compare(c);
      return;
    }
    if (s.size() == 2 && s[1] == "runs") {
      if (method("GET") && allowed(c, Role::viewer)) handlers_.listRuns(c);
      return;
    }
    if (s.size() == 3 && s[1] == "runs") {
      if (m == "GET") {
        if (allowed(c, Role::viewer)) handlers_.showRun(c, s[2]);
      } else if (m == "DELETE") {
        if (allowed(c, Role::pipeline)) handlers_.cancelRun(c, s[2]);
      } else {
        c.respond(withAllow(jsonError(405, "method_not_allowed", echoed(m) + " is not allowed on " + echoed(c.target.path)),
                            "GET, DELETE"));
      }
      return;
    }
    if (s.size() == 4 && s[1] == "runs" && (s[3] == "events" || s[3] == "artifacts.tar")) {
      if (method("GET") && allowed(c, Role::viewer))
        s[3] == "events" ? handlers_.runEvents(c, s[2]) : handlers_.runArtifactsTar(c, s[2]);
      return;
    }
    if (s.size() >= 5 && s[1] == "runs" && s[3] == "artifacts") {
      std::string path;
      for (size_t i = 4; i < s.size(); ++i) path += (i > 4 ? "/" : "") + s[i];
      if (method("GET") && allowed(c, Role::viewer)) handlers_.runArtifact(c, s[2], path);
      return;
    }
    if (s.size() == 2 && s[1] == "uploads") {
      if (method("GET") && allowed(c, Role::viewer)) handlers_.listUploads(c);
      return;
    }
    if (s.size() == 4 && s[1] == "uploads" && s[3] == "retry") {
      if (method("POST") && allowed(c, Role::pipeline)) handlers_.retryUpload(c, s[2]);
      return;
    }
    if (s.size() == 4 && s[1] == "leases" && s[3] == "renew") {
      if (method("POST") && allowed(c, Role::pipeline)) handlers_.renew(c, s[2]);
      return;
    }
    if (s.size() == 2 && s[1] == "should-run") {
      if (method("POST") && allowed(c, Role::viewer)) handlers_.shouldRun(c);
      return;
    }
    if (s.size() == 4 && s[1] == "leases" && s[3] == "twister-hwmap") {
      if (method("GET") && allowed(c, Role::viewer)) handlers_.twisterHwmap(c, s[2]);
      return;
    }
  }
  c.respond(jsonError(404, "not_found", "no such endpoint: " + echoed(c.target.path)));
}

BodyPlan Router::planBody(const HttpRequest& head) {
  BodyPlan plan;
  if (head.method != "POST" || !isOctetStream(head.content_type)) return plan;
  Target target = parseTarget(head.target);
  const auto& s = target.segments;
  bool flash = s.size() == 6 && s[0] == "v1" && s[1] == "leases" && s[3] == "boards" && s[5] == "flash";
  bool image = s.size() == 4 && s[0] == "v1" && s[1] == "leases" && s[3] == "images";
  bool results = s.size() == 4 && s[0] == "v1" && s[1] == "leases" && s[3] == "results";
  if (!flash && !image && !results) return plan;
  // What the route would answer, answered before the body arrives.
  auto captured = std::make_shared<Captured>();
  Call call(head, auth_.authenticate(head.authorization, head.local_peer), Reply(captured, &responses_));
  std::optional<BodyPlan> upload;
  if (allowed(call, Role::pipeline))
    upload = flash     ? handlers_.planUpload(call, s[2], s[4])
             : results ? handlers_.planResults(call, s[2])
                       : handlers_.planImageUpload(call, s[2]);
  if (upload) return *upload;
  plan.kind = BodyPlan::Kind::refuse;
  plan.refusal = std::move(*captured->response);
  return plan;
}

} // namespace hwfarm::api
