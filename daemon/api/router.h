// The HTTP API's request dispatch (docs/api.md): authentication, the route
// table and each route's role, then the route's handler (handlers.h).
// Beast-free; the server hands it transport-neutral requests.
#pragma once

#include <map>

#include "daemon/api/handlers.h"

namespace hwfarm::api {

class Router {
 public:
  Router(const AgentState& state, LeaseService& leases, BoardService& boards, const Authenticator& auth,
         RunService* runs = nullptr, HealthService* health = nullptr, UploadService* uploads = nullptr)
      : handlers_(state, leases, boards, runs, health, uploads), auth_(auth) {}

  // Answers 401/403 for a caller without the route's role, 404/405 for no
  // route, 500 for a handler that throws; otherwise the handler answers.
  // REQUIRES: called on the event loop thread.
  void handle(HttpRequest request, std::shared_ptr<Exchange> exchange);

  // The server's body policy (http_types.h): an image upload to the flash
  // route (Content-Type: application/octet-stream) by a caller who may
  // flash that board is spooled into the lease's image store, up to
  // limits.max_image_bytes; one who may not is answered from the head, its
  // body unread. Every other body is read into memory.
  BodyPlan planBody(const HttpRequest& head);

  // The tier SLA routes' service (Handlers::setSla).
  void setSla(SlaService* sla) { handlers_.setSla(sla); }
  // The dashboard's run index (Handlers::setRunIndex).
  void setRunIndex(RunIndex* index) { handlers_.setRunIndex(index); }

  // HTTP responses sent, by status code (for /metrics).
  const std::map<int, uint64_t>& responseCounts() const { return responses_; }

 private:
  void route(Call& call);

  Handlers handlers_;
  const Authenticator& auth_;
  std::map<int, uint64_t> responses_;
};

} // namespace hwfarm::api
