// The route handlers (docs/api.md): each is a function from a request (a
// Call: the HTTP request, its parsed target, the authenticated principal)
// and the daemon's services (the Handlers object) to a response, given
// through the call's Reply. No socket is involved: a test builds a Call,
// calls the handler and reads the answer from its Exchange (daemon/api/README.md).
//
// The router (router.h) authenticates, checks the route's role and picks the
// handler; the server (server.h) does HTTP. A handler validates the request,
// calls the services and answers exactly once: at once, or later from the
// service's completion (after a commit, at the end of a long-poll wait, when a
// driver finished). It answers 4xx with a JSON error before it changes any
// state. It may throw (a full disk); the router answers 500 then.
//
// Thread safety: every handler on the event loop thread, as the services.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/api/agent_state.h"
#include "daemon/api/auth.h"
#include "daemon/api/http_types.h"
#include "daemon/services/board_service.h"
#include "daemon/services/health_service.h"
#include "daemon/services/lease_service.h"
#include "daemon/services/run_index.h"
#include "daemon/services/run_service.h"
#include "daemon/services/upload_service.h"
#include "daemon/services/sla_service.h"

namespace hwfarm::api {

struct RunStreams; // routes_runs.cpp

// Splits "/a/b?x=1&y" into a path and query parameters.
struct Target {
  std::string path;
  std::vector<std::string> segments; // "/v1/leases/x" -> {"v1", "leases", "x"}
  std::vector<std::pair<std::string, std::string>> query;
  bool has(const std::string& key) const;
};
Target parseTarget(const std::string& target);

// The answer channel of one call: sends a response through its Exchange,
// counting the answers sent by status when given a count map (the router's,
// for /metrics). Handlers that answer later capture a copy (no allocation
// per copy).
class Reply {
 public:
  Reply() = default;
  explicit Reply(std::shared_ptr<Exchange> exchange, std::map<int, uint64_t>* counts = nullptr)
      : exchange_(std::move(exchange)), counts_(counts) {}
  void operator()(HttpResponse r) const {
    int status = r.status;
    if (exchange_->respond(std::move(r)) && counts_) ++(*counts_)[status]; // answers actually sent
  }
  const std::shared_ptr<Exchange>& exchange() const { return exchange_; }

 private:
  std::shared_ptr<Exchange> exchange_;
  std::map<int, uint64_t>* counts_ = nullptr;
};

// One request as a handler gets it. `principal` is set for every route but
// /v1/healthz, with at least the route's role (the router checks).
struct Call {
  HttpRequest request; // method, target, Authorization and Content-Type, body or spooled upload
  Target target;       // parseTarget(request.target)
  std::optional<Principal> principal;
  Reply respond;

  Call() = default;
  Call(HttpRequest r, std::optional<Principal> who, Reply reply)
      : request(std::move(r)), target(parseTarget(request.target)), principal(std::move(who)),
        respond(std::move(reply)) {}
};

// The handlers over the daemon's services, which outlive it. Ids and board
// names are the route's path segments, as the client sent them.
class Handlers {
 public:
  // Without `runs` the run routes answer 503, without `uploads` the upload routes.
  Handlers(const AgentState& state, LeaseService& leases, BoardService& boards, RunService* runs = nullptr,
           HealthService* health = nullptr, UploadService* uploads = nullptr)
      : state_(state), leases_(leases), boards_(boards), runs_(runs), health_(health), uploads_(uploads) {}

  // The dashboard (routes_ui.cpp): its static files (GET /, /site.json,
  // /ui/...; no token needed) and GET /v1/whoami (the caller's name and role;
  // null ones without a valid token).
  void staticFile(Call& call);
  void whoami(Call& call);
  // The dashboard's questions about many runs, from the run index
  // (routes_dashboard.cpp): GET /v1/runs paged and filtered (listRuns
  // answers from it once setRunIndex() gave one), GET /v1/history, GET
  // /v1/compare. Without a run index: 503 (listRuns: the runs in memory).
  void setRunIndex(RunIndex* index) { run_index_ = index; }
  void history(Call& call);
  void compare(Call& call);

  // GET /v1/healthz (routes_health.cpp).
  void healthz(Call& call);
  // GET /metrics (routes_metrics.cpp); `responses` are the answers sent so far by status.
  void metrics(Call& call, const std::map<int, uint64_t>& responses);
  // The CI routes (routes_ci.cpp): POST /v1/should-run (the decision on
  // the effective tier and [should_run]) and GET
  // /v1/leases/{id}/twister-hwmap (its boards through [[twister]]).
  void shouldRun(Call& call);
  void twisterHwmap(Call& call, const std::string& id);

  // The tier SLA routes (routes_sla.cpp): GET /v1/sla (the standing and
  // its warning), GET /v1/tier (tiers, pin, transitions), POST
  // /v1/tier/pin and /v1/tier/unpin (operator; answered once saved).
  // Without setSla() they answer 503 (and /metrics has no SLA families).
  void setSla(SlaService* sla) { sla_ = sla; }
  void sla(Call& call);
  void tier(Call& call);
  void pinTier(Call& call);
  void unpinTier(Call& call);

  // The lease routes (routes_leases.cpp): GET /v1/queue, GET and POST
  // /v1/leases, GET and DELETE /v1/leases/{id}, POST /v1/leases/{id}/renew.
  void queue(Call& call);
  void listLeases(Call& call);
  void acquire(Call& call);
  void showLease(Call& call, const std::string& id);
  void renew(Call& call, const std::string& id);
  void release(Call& call, const std::string& id);

  // The board routes (routes_boards.cpp): GET /v1/boards, POST
  // /v1/boards/{name}/maintenance|resume (`action`), and a lease's board
  // operations /v1/leases/{id}/boards/{board}/flash|power|console (`what`).
  // A console answer is streamed: HttpResponse::stream gets the sink.
  void boards(Call& call);
  void boardAction(Call& call, const std::string& name, const std::string& action);
  // GET /v1/boards/{name}: the board with its health and check history;
  // POST /v1/boards/{name}/check: an operator's health check, queued (202).
  // Without a health service: health is left out, a check is 503.
  void board(Call& call, const std::string& name);
  void boardCheck(Call& call, const std::string& name);
  void boardOperation(Call& call, const std::string& id, const std::string& board, const std::string& what);
  // The flash route's upload, decided from the request's head (the body is
  // not read yet): the plan to spool it into the lease's image store, or
  // nothing once the refusal (not the lease, not its board, a bad ?name=,
  // no image store) is answered through `call`.
  std::optional<BodyPlan> planUpload(Call& call, const std::string& id, const std::string& board);

  // The run routes (routes_runs.cpp): POST /v1/leases/{id}/images (an
  // upload into the lease's image store), POST /v1/leases/{id}/runs, GET
  // /v1/runs, GET and DELETE /v1/runs/{id}, GET
  // /v1/runs/{id}/artifacts/{path}, and streamed: GET /v1/runs/{id}/events
  // (newline-delimited JSON, daemon/services/run_events.h) and GET
  // /v1/runs/{id}/artifacts.tar (an ended run's artifacts). planImageUpload
  // is the images route's body plan, as planUpload is the flash route's.
  std::optional<BodyPlan> planImageUpload(Call& call, const std::string& id);
  void uploadImage(Call& call, const std::string& id);
  void startRun(Call& call, const std::string& id);
  // POST /v1/leases/{id}/results (docs/harness-results.md): a harness's
  // results archive, spooled (planResults, decided from the head), then
  // published as a run of kind external.
  std::optional<BodyPlan> planResults(Call& call, const std::string& id);
  void publishResults(Call& call, const std::string& id);
  void listRuns(Call& call);
  void showRun(Call& call, const std::string& id);
  void cancelRun(Call& call, const std::string& id);
  void runArtifact(Call& call, const std::string& id, const std::string& path);
  void runEvents(Call& call, const std::string& id);
  void runArtifactsTar(Call& call, const std::string& id);

  // The upload routes (routes_uploads.cpp, docs/uploads.md): GET
  // /v1/uploads (pending and failed), POST /v1/uploads/{run}/retry.
  void listUploads(Call& call);
  void retryUpload(Call& call, const std::string& run);

 private:
  SlaService* sla_ = nullptr;
  RunIndex* run_index_ = nullptr;
  void listIndexedRuns(Call& call);

  // The active lease `id` holding `board` that the caller may operate, or
  // nullptr once the refusal is answered.
  const lease::Lease* leaseForBoard(Call& call, const std::string& id, const std::string& board);
  void flash(Call& call, const lease::Lease& lease, const std::string& board);
  // The active lease `id` the caller may use, or nullptr once the refusal
  // is answered.
  const lease::Lease* ownedLease(Call& call, const std::string& id);
  // The plan that spools an upload (?name= gives its type; `golden`: a
  // run's golden file, whatever its name says) into `lease`'s image store,
  // or nothing once the refusal is answered.
  std::optional<BodyPlan> planImageStore(Call& call, const lease::Lease& lease, bool golden = false);
  // The plan that spools a body of at most `limit` bytes (the config key
  // `limit_name`) into `lease`'s store, or nothing once the refusal is answered.
  std::optional<BodyPlan> spoolPlan(Call& call, const lease::Lease& lease, uint64_t limit, const std::string& limit_name);
  // The events route's answer, once run `id` is known to exist.
  void followRun(const Reply& respond, const std::string& id);

  const AgentState& state_;
  LeaseService& leases_;
  BoardService& boards_;
  RunService* runs_;
  HealthService* health_;
  UploadService* uploads_;
  // The streamed answers (events, artifacts, archives) open per run,
  // made at the first.
  const std::shared_ptr<RunStreams>& runStreams();
  std::shared_ptr<RunStreams> run_streams_;
};

} // namespace hwfarm::api
