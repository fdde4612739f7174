// The lease routes: /v1/queue, /v1/leases, /v1/leases/{id} and its renew.
#include <algorithm>
#include <sstream>

#include "config/suggest.h"
#include "daemon/api/json_writer.h"
#include "daemon/api/routes.h"
#include "daemon/services/disk_room.h"
#include "daemon/core/health/format.h"

namespace hwfarm::api {
using config::Role;

namespace {

// What a 422 adds for a selector no configured boards satisfy: to
// `detail`, a suggestion when the type (or the worker) is unknown and a
// configured one is close, with the configured ones listed; returned, the
// configured board types, the closest to the selector's first. Computed on
// this error path only, never on a grant.
std::vector<std::string> explainUnsatisfiable(const config::FleetConfig& config, const lease::Selector& selector,
                                              std::string* detail) {
  std::vector<std::string> types, workers;
  for (const auto& worker : config.workers) {
    workers.push_back(worker.name);
    for (const auto& b : worker.boards) types.push_back(b.type);
  }
  types = config::closestFirst(selector.type, types);
  auto listed = [](const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 10; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > 10) out += ", ... (" + std::to_string(names.size() - 10) + " more)";
    return out;
  };
  auto suggest = [&](const std::string& what, const std::string& word, const std::vector<std::string>& known) {
    *detail += "; no configured board has " + what + " \"" + word + "\"";
    if (std::string close = config::closestMatch(word, known); !close.empty())
      *detail += "; did you mean \"" + close + "\"?";
  };
  bool type_known = selector.type.empty() || std::find(types.begin(), types.end(), selector.type) != types.end();
  if (!type_known) {
    suggest("type", selector.type, types);
    *detail += " (configured types: " + listed(types) + ")";
  }
  std::vector<std::string> nodes = workers;
  for (const auto& worker : config.workers) nodes.push_back(worker.node);
  if (!selector.worker.empty() && std::find(nodes.begin(), nodes.end(), selector.worker) == nodes.end()) {
    workers = config::closestFirst(selector.worker, workers);
    if (std::string close = config::closestMatch(selector.worker, nodes); !close.empty())
      *detail += "; did you mean \"" + close + "\"?";
    *detail += " (workers: " + listed(workers) + ")";
  }
  return types;
}

} // namespace

void Handlers::queue(Call& c) {
  JsonWriter w;
  w.beginObject().key("queue").beginArray();
  int64_t now = leases_.nowMs();
  auto aging_ms = static_cast<int64_t>(state_.config->leases.aging_s * 1000);
  const lease::Scheduler& scheduler = leases_.scheduler();
  if (c.target.has("key")) {
    // The caller's own request sent with this idempotency key: what a
    // waiting client polls for its place, counted without sorting the queue.
    if (const lease::LeaseRequest* r = scheduler.waiting(c.principal->name, queryValue(c.target, "key")))
      writeQueueEntry(w, *r, scheduler.position(r->ticket, now), now, aging_ms);
  } else {
    size_t position = 0;
    for (const lease::LeaseRequest* r : scheduler.queue(now)) writeQueueEntry(w, *r, ++position, now, aging_ms);
  }
  w.endArray().endObject();
  c.respond(okText(w.take()));
}

void Handlers::listLeases(Call& c) {
  bool all = c.target.has("all");
  std::string prefix = queryValue(c.target, "prefix"); // what hwfarmctl resolves an id prefix with
  // Oldest grant first.
  std::vector<const lease::Lease*> list;
  for (const auto& [id, l] : leases_.scheduler().leases())
    if ((all || l.state == lease::LeaseState::active) && id.rfind(prefix, 0) == 0) list.push_back(&l);
  std::sort(list.begin(), list.end(), [](const lease::Lease* a, const lease::Lease* b) {
    return a->granted_ms != b->granted_ms ? a->granted_ms < b->granted_ms : a->id < b->id;
  });
  JsonWriter w;
  w.beginObject().key("leases").beginArray();
  for (const lease::Lease* l : list) writeLease(w, *l, leases_.scheduler());
  w.endArray().endObject();
  c.respond(okText(w.take()));
}

void Handlers::showLease(Call& c, const std::string& id) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) return c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
  c.respond(okText(leaseJson(*l, leases_.scheduler())));
}

void Handlers::acquire(Call& c) {
  Result<AcquireRequest> parsed = parseAcquire(c.request.body, state_.config->limits, state_.config->leases);
  if (!parsed) return c.respond(errorResponse(parsed.status()));
  lease::LeaseRequest& r = parsed->request;
  r.holder.principal = c.principal->name;
  // A retry of a request that was admitted gets its lease (or rejoins its
  // wait) even if the tier changed since.
  bool retry = !r.idempotency_key.empty() && leases_.scheduler().knowsKey(r.holder.principal, r.idempotency_key);
  if (!retry && !lease::tierServes(state_.effective_tier, r.context)) {
    // The reason says since when and why: "demoted to tier 2 at
    // 2026-12-01T03:12Z: infrastructure failure on stm32-2 (flash timeout)
    // unresolved for 24h".
    std::string why = state_.tier_reason.empty()
                          ? "serving " + health::tierName(state_.effective_tier) +
                                (state_.tier_since_ms > 0 ? " since " + rfc3339(state_.tier_since_ms) : "")
                          : state_.tier_reason;
    HttpResponse refused = jsonError(409, "tier_refused",
                                     why + "; " + health::tierName(state_.effective_tier) + " does not take \"" +
                                         lease::toString(r.context) + "\" requests");
    json::object body = json::parse(refused.body).as_object();
    body["effective_tier"] = state_.effective_tier;
    body["registered_tier"] = state_.config->agent.tier;
    body["since"] = tierSince(state_.tier_since_ms);
    body["reason"] = why;
    refused.body = toJson(body);
    return c.respond(refused);
  }
  // A full disk leaves its room to the leases that are: no new one (a
  // board's console log and its runs could not be kept anyway).
  if (!retry)
    if (Status room = roomForWork(state_.config->agent.state_dir,
                                  static_cast<uint64_t>(state_.config->limits.disk_reserve_bytes));
        room.is(Code::no_space))
      return c.respond(jsonError(507, "insufficient_storage",
                                 room.message() + ": hwfarmd grants no new lease until space is freed"));
  auto respond = c.respond;
  double wait_s = static_cast<double>(parsed->wait_ms) / 1000.0;
  lease::Selector selector = r.selector;
  leases_.acquire(
      std::move(r), parsed->wait_ms,
      [this, respond, wait_s, selector](const AcquireOutcome& o) {
        if (o.status.ok()) return respond(okText(leaseJson(o.lease, leases_.scheduler()), o.existing ? 200 : 201));
        // Exceptions (docs/api.md): a wait that ran out, a selector nothing
        // matches, a full queue and a stopping daemon have answers of their own.
        switch (o.status.code()) {
          case Code::timeout: {
            std::ostringstream detail;
            detail << "no matching board was free within wait_s = " << wait_s;
            json::object body{{"error", "wait_timeout"}, {"detail", detail.str()}, {"queue_position", o.position}};
            return respond(ok(body, 408));
          }
          case Code::invalid_argument: {
            std::string detail = o.status.message();
            std::vector<std::string> types = explainUnsatisfiable(*state_.config, selector, &detail);
            JsonWriter w;
            w.beginObject().member("error", "unsatisfiable").member("detail", detail).key("selector");
            writeSelector(w, selector);
            w.key("configured_types").beginArray();
            for (const auto& t : types) w.value(t);
            w.endArray().endObject();
            return respond(okText(w.take(), 422));
          }
          case Code::busy: return respond(jsonError(503, "queue_full", o.status.message()));
          case Code::unavailable: return respond(jsonError(503, "shutting_down", o.status.message()));
          default: return respond(errorResponse(o.status));
        }
      },
      [exchange = c.respond.exchange()](std::function<void()> hook) { exchange->onClientGone(std::move(hook)); });
}

void Handlers::renew(Call& c, const std::string& id) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) return c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
  if (!hasRole(*c.principal, Role::operator_) && l->holder.principal != c.principal->name)
    return c.respond(jsonError(403, "forbidden", "lease " + id + " belongs to \"" + l->holder.principal + "\""));
  Result<int64_t> ttl = parseRenew(c.request.body, state_.config->limits, l->ttl_ms);
  if (!ttl) return c.respond(errorResponse(ttl.status()));
  auto respond = c.respond;
  leases_.renew(id, *ttl, [this, respond](lease::OpResult r) {
    if (r.status.is(Code::conflict)) { // the lease has ended: the exception not_active, with the lease
      JsonWriter w;
      w.beginObject().member("error", "not_active").member("detail", r.status.message()).key("lease");
      writeLease(w, r.lease, leases_.scheduler());
      w.endObject();
      return respond(okText(w.take(), 409));
    }
    respond(okText(leaseJson(r.lease, leases_.scheduler())));
  });
}

void Handlers::release(Call& c, const std::string& id) {
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

} // namespace hwfarm::api
