// The board routes: /v1/boards and its operator actions, and a lease's
// board operations (/v1/leases/{id}/boards/{board}/flash|power|console).
#include <unistd.h>

#include <algorithm>

#include "daemon/api/routes.h"
#include <spdlog/spdlog.h>

#include "daemon/core/run/evidence_json.h"
#include "daemon/services/image_store.h"

namespace hwfarm::api {
using config::Role;

namespace {
std::optional<json::object> healthJson(const HealthService* health, const std::string& name, bool with_history);
} // namespace

void Handlers::boards(Call& c) {
  json::array list;
  const auto& scheduler = leases_.scheduler();
  for (const auto& worker : state_.config->workers)
    for (const auto& board : worker.boards) {
      json::object b = boardJson(worker, board, scheduler.board(board.name));
      // ?health=1: each board's health without its check history (the dashboard's fleet view).
      if (c.target.has("health"))
        if (auto health = healthJson(health_, board.name, false)) b["health"] = std::move(*health);
      list.push_back(std::move(b));
    }
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

void Handlers::boardAction(Call& c, const std::string& name, const std::string& action) {
  Result<std::string> reason = parseReason(c.request.body);
  if (!reason) return c.respond(errorResponse(reason.status()));
  if (!leases_.scheduler().board(name)) return c.respond(jsonError(404, "not_found", "no board " + echoed(name)));
  auto respond = c.respond;
  auto done = [this, respond, name](lease::OpResult r) {
    if (!r.status.ok()) return respond(errorResponse(r.status));
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

namespace {

json::object checkJson(const health::CheckRecord& r) {
  json::array steps;
  for (const auto& st : r.steps) {
    json::object o{{"step", health::toString(st.step)}, {"ok", st.ok}, {"ms", st.duration_ms}};
    if (st.skipped) o["skipped"] = true;
    if (!st.detail.empty()) o["detail"] = st.detail;
    steps.push_back(std::move(o));
  }
  json::object o{{"started", rfc3339(r.started_ms)}, {"duration_ms", r.durationMs()},
                 {"trigger", health::toString(r.trigger)}, {"passed", r.passed()}, {"steps", std::move(steps)}};
  if (!r.passed()) o["evidence"] = r.evidence();
  return o;
}

// Board `name`'s health (GET /v1/boards/{name}; ?health=1 of the list), with
// its checks or without; nothing without a health service or such a board.
std::optional<json::object> healthJson(const HealthService* health, const std::string& name, bool with_history) {
  const health::BoardHealth* h = health ? health->board(name) : nullptr;
  if (!h) return std::nullopt;
  const health::BoardHealthState& s = h->state();
  json::object o{{"state", health::toString(s.health)}, {"failed_ladders", s.failed_ladders},
                 {"quarantine_after", h->options().quarantine_after}};
  if (!s.reason.empty()) o["reason"] = s.reason;
  if (s.backoff_ms > 0) o["backoff_s"] = static_cast<double>(s.backoff_ms) / 1000.0;
  if (s.last_check_ms > 0 && !s.history.empty()) o["last_check"] = rfc3339(s.last_check_ms);
  if (auto next = health->nextCheckMs(name)) o["next_check"] = rfc3339(*next);
  if (!s.history.empty()) o["last_passed"] = s.history.back().passed();
  if (!with_history) return o;
  json::array history;
  for (auto it = s.history.rbegin(); it != s.history.rend(); ++it) history.push_back(checkJson(*it));
  o["history"] = std::move(history); // newest first
  return o;
}

} // namespace

void Handlers::board(Call& c, const std::string& name) {
  const config::BoardConfig* cfg = state_.config->findBoard(name);
  const lease::Board* b = leases_.scheduler().board(name);
  if (!cfg || !b) return c.respond(jsonError(404, "not_found", "no board " + echoed(name)));
  json::object body;
  for (const auto& worker : state_.config->workers)
    for (const auto& wb : worker.boards)
      if (wb.name == name) body = boardJson(worker, wb, b);
  if (auto health = healthJson(health_, name, true)) body["health"] = std::move(*health);
  c.respond(ok(body));
}

void Handlers::boardCheck(Call& c, const std::string& name) {
  if (!health_) return c.respond(jsonError(503, "unavailable", "health checks are not run here"));
  Status s = health_->requestCheck(name, c.principal->name);
  if (s.is(Code::not_found)) return c.respond(jsonError(404, "not_found", "no board " + echoed(name)));
  if (!s.ok()) return c.respond(errorResponse(s));
  spdlog::info("board {}: health check asked for by {}", name, c.principal->name);
  c.respond(ok(json::object{{"board", name}, {"check", "queued"}, {"by", c.principal->name}}, 202));
}

namespace {


// The answer to a flash or power operation; `extra` adds members (the image).
// A refusal (no failure class: busy, unsupported) answers as its code does;
// every other failure is the lab's (the exception: 502), with its failure
// class and evidence, whatever its code (fork's EAGAIN is Code::busy too).
void answerOperation(const Reply& respond, const std::string& board, const Status& status, double seconds,
                     const std::string& log, const json::object& extra = {}) {
  bool refusal = status.failureClass() == FailureClass::none;
  if (refusal && (status.is(Code::busy) || status.is(Code::unsupported))) return respond(errorResponse(status));
  if (!status.ok()) {
    json::object body{{"error", "infrastructure_failure"}, {"detail", status.message()}, {"board", board}};
    if (status.failureClass() != FailureClass::none) body["failure_class"] = failureClassName(status.failureClass());
    if (!status.evidence().empty()) body["evidence"] = evidenceJson(status.evidence());
    if (!log.empty()) body["log"] = log;
    return respond(ok(body, 502));
  }
  json::object body{{"board", board}, {"ok", true}, {"ms", static_cast<int64_t>(seconds * 1000)}};
  if (!log.empty()) body["log"] = log;
  for (const auto& [k, v] : extra) body[k] = v;
  respond(ok(body));
}

} // namespace

const lease::Lease* Handlers::ownedLease(Call& c, const std::string& id) {
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
  return l;
}

const lease::Lease* Handlers::leaseForBoard(Call& c, const std::string& id, const std::string& board) {
  const lease::Lease* l = ownedLease(c, id);
  if (!l) return nullptr;
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

std::optional<BodyPlan> Handlers::planUpload(Call& c, const std::string& id, const std::string& board) {
  const lease::Lease* l = leaseForBoard(c, id, board);
  if (!l) return std::nullopt;
  return planImageStore(c, *l);
}

std::optional<BodyPlan> Handlers::planImageStore(Call& c, const lease::Lease& lease, bool golden) {
  if (Result<std::string> ext = imageExtension(uploadName(c.target)); !golden && !ext) {
    c.respond(jsonError(400, "invalid_request", ext.status().message()));
    return std::nullopt;
  }
  return spoolPlan(c, lease, static_cast<uint64_t>(state_.config->limits.max_image_bytes), "limits.max_image_bytes");
}

std::optional<BodyPlan> Handlers::spoolPlan(Call& c, const lease::Lease& lease, uint64_t limit,
                                            const std::string& limit_name) {
  if (Status made = boards_.makeImageDir(lease.id); !made.ok()) {
    c.respond(jsonError(500, "storage_error", made.message()));
    return std::nullopt;
  }
  BodyPlan plan;
  plan.kind = BodyPlan::Kind::file;
  plan.limit = limit;
  plan.limit_name = limit_name;
  plan.dir = boards_.imageDir(lease.id);
  plan.reserve = static_cast<uint64_t>(state_.config->limits.disk_reserve_bytes);
  return plan;
}

void Handlers::flash(Call& c, const lease::Lease& lease, const std::string& board) {
  auto respond = c.respond;
  std::string log = boards_.flashLogPath(lease.id, board);
  auto done = [respond, board, log](json::object image) {
    return [respond, board, log, image](Status s, double seconds, const std::string&) {
      answerOperation(respond, board, s, seconds, log, json::object{{"image", image}});
    };
  };
  std::string error;
  if (const auto& upload = c.request.upload) {
    // The image came in the body, already spooled into the lease's store.
    std::string name = uploadName(c.target);
    Result<std::string> ext = imageExtension(name);
    if (!ext) return c.respond(jsonError(400, "invalid_request", ext.status().message()));
    Result<std::string> stored = storeUpload(upload->path, upload->sha256, boards_.imageDir(lease.id), *ext);
    if (!stored)
      return c.respond(jsonError(500, "storage_error", "cannot store the upload: " + stored.status().message()));
    json::object image{{"sha256", upload->sha256}, {"bytes", upload->bytes}, {"name", sanitizeImageName(name)},
                       {"stored", *stored}};
    return boards_.flash(lease, board, *stored, done(image));
  }
  Result<json::object> object = c.request.body.empty() ? json::object{} : parseObject(c.request.body);
  if (!object) return c.respond(errorResponse(object.status()));
  const json::value* image = object->if_contains("image");
  if (!image || !image->is_string() || image->as_string().empty() || image->as_string()[0] != '/' ||
      object->size() != 1)
    return c.respond(jsonError(400, "invalid_request",
                               "expected the image as an application/octet-stream body, or "
                               "{\"image\": \"/absolute/path/under/agent.image_roots\"}"));
  std::string path(image->as_string());
  Result<ServerImage> opened = openServerImage(path, state_.config->agent.image_roots,
                                              static_cast<uint64_t>(state_.config->limits.max_image_bytes));
  if (!opened) {
    const Status& s = opened.status();
    // Exceptions: the path's refusal and a missing image have names of their own.
    if (s.is(Code::permission_denied)) return c.respond(jsonError(403, "image_path_refused", s.message()));
    if (s.is(Code::too_large)) return c.respond(errorResponse(s));
    return c.respond(jsonError(400, "invalid_image", s.message()));
  }
  ServerImage file = *opened;
  Result<std::string> ext = imageExtension(file.real_path);
  if (!ext) {
    ::close(file.fd);
    return c.respond(jsonError(400, "invalid_image", ext.status().message()));
  }
  boards_.flashCopy(lease, board, file.fd, *ext, done(json::object{{"path", path}, {"bytes", file.bytes}}));
}

void Handlers::boardOperation(Call& c, const std::string& id, const std::string& board, const std::string& what) {
  const lease::Lease* l = leaseForBoard(c, id, board);
  if (!l) return;
  if (what == "flash") return flash(c, *l, board);
  lease::Lease lease = *l;
  auto respond = c.respond;
  Result<json::object> object = c.request.body.empty() ? json::object{} : parseObject(c.request.body);
  if (!object) return c.respond(errorResponse(object.status()));
  if (what == "power") {
    const json::value* action = object->if_contains("action");
    std::string a = action && action->is_string() ? std::string(action->as_string()) : "";
    if ((a != "on" && a != "off" && a != "cycle") || object->size() != 1)
      return c.respond(jsonError(400, "invalid_request", "expected {\"action\": \"on\" | \"off\" | \"cycle\"}"));
    drivers::PowerAction pa = a == "on" ? drivers::PowerAction::on
                              : a == "off" ? drivers::PowerAction::off
                                           : drivers::PowerAction::cycle;
    boards_.power(lease, board, pa,
                  [respond, board](Status s, double seconds) { answerOperation(respond, board, s, seconds, ""); });
  } else {
    int64_t most = state_.config->limits.max_console_streams;
    if (boards_.consoleReaders(id) >= static_cast<size_t>(most))
      return c.respond(jsonError(429, "too_many_streams",
                                 "lease " + id + " already has " + std::to_string(most) +
                                     " console streams open (limits.max_console_streams); close one first"));
    HttpResponse r;
    r.content_type = "text/plain; charset=utf-8";
    BoardService* boards = &boards_;
    // Not `respond`: the exchange holds this response, and a capture of it
    // would hold the exchange (a cycle).
    r.stream = [boards, lease, board](std::shared_ptr<StreamSink> sink) {
      auto cancel = std::make_shared<std::function<void()>>();
      BoardService::Reader reader{[sink](const std::string& text) { return sink->write(text); },
                                  [sink] { sink->end(); }, [sink] { return sink->queued(); },
                                  [sink](std::function<void()> on_drained) { sink->onDrained(std::move(on_drained)); }};
      if (Status opened = boards->readConsole(lease, board, reader, cancel.get()); !opened.ok()) {
        sink->write("-- hwfarmd: " + opened.message() + " --\n");
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
