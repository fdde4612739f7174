// The HTTP API's request handling: a function of (request, agent state).
#pragma once

#include "daemon/agent_state.h"
#include "daemon/api/http_types.h"

namespace hwfarm::api {

// Splits "/a/b?x=1&y" into a path and query parameters.
struct Target {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  bool has(const std::string& key) const;
};
Target parseTarget(const std::string& target);

class Router {
 public:
  explicit Router(const AgentState& state) : state_(state) {}

  // REQUIRES: called on the event loop thread.
  void handle(const HttpRequest& request, const Respond& respond) const;

 private:
  HttpResponse healthz() const;
  HttpResponse boards(const Target& target) const;

  const AgentState& state_;
};

} // namespace hwfarm::api
