// The HTTP API's request handling (docs/api.md): authentication, routing,
// request validation and JSON rendering. Beast-free; the server hands it
// transport-neutral requests.
#pragma once

#include <map>

#include "daemon/api/agent_state.h"
#include "daemon/api/auth.h"
#include "daemon/api/http_types.h"
#include "daemon/services/board_service.h"
#include "daemon/services/lease_service.h"

namespace hwfarm::api {

// Splits "/a/b?x=1&y" into a path and query parameters.
struct Target {
  std::string path;
  std::vector<std::string> segments; // "/v1/leases/x" -> {"v1", "leases", "x"}
  std::vector<std::pair<std::string, std::string>> query;
  bool has(const std::string& key) const;
};
Target parseTarget(const std::string& target);

class Router {
 public:
  Router(const AgentState& state, LeaseService& leases, BoardService& boards, const Authenticator& auth)
      : state_(state), leases_(leases), boards_(boards), auth_(auth) {}

  // REQUIRES: called on the event loop thread.
  void handle(HttpRequest request, std::shared_ptr<Exchange> exchange);

  // The server's body policy (http_types.h): an image upload to the flash
  // route (Content-Type: application/octet-stream) by a caller who may
  // flash that board is spooled into the lease's image store, up to
  // limits.max_image_bytes; one who may not is answered from the head, its
  // body unread. Every other body is read into memory.
  BodyPlan planBody(const HttpRequest& head);

  // HTTP responses sent, by status code (for /metrics).
  const std::map<int, uint64_t>& responseCounts() const { return responses_; }

 private:
  struct Call; // routes.h
  void route(Call& call);
  // The handlers, by resource: routes_health.cpp, routes_metrics.cpp,
  // routes_leases.cpp, routes_boards.cpp.
  void healthz(Call& call);
  void metrics(Call& call);
  void queue(Call& call);
  void listLeases(Call& call);
  void acquire(Call& call);
  void showLease(Call& call, const std::string& id);
  void renew(Call& call, const std::string& id);
  void release(Call& call, const std::string& id);
  void boards(Call& call);
  void boardAction(Call& call, const std::string& name, const std::string& action);
  void boardOperation(Call& call, const std::string& id, const std::string& board, const std::string& what);
  // The active lease `id` holding `board` that the caller may operate, or
  // nullptr once the refusal is answered.
  const lease::Lease* leaseForBoard(Call& call, const std::string& id, const std::string& board);
  void flash(Call& call, const lease::Lease& lease, const std::string& board);

  const AgentState& state_;
  LeaseService& leases_;
  BoardService& boards_;
  const Authenticator& auth_;
  std::map<int, uint64_t> responses_;
};

} // namespace hwfarm::api
