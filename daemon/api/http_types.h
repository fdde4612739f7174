// Transport-neutral HTTP request/response, so handlers are plain functions
// testable without a socket. Only api/server.cpp knows about Beast.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hwfarm::api {

struct HttpRequest {
  std::string method; // "GET", "POST", ...
  std::string target; // path and query, e.g. "/v1/boards?all=1"
  std::string body;
  std::string authorization; // the Authorization header, may be empty
  bool local_peer = false;   // loopback TCP or unix socket
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// Handlers answer through `respond`, now or later (long-poll); exactly once.
using Respond = std::function<void(HttpResponse)>;
// A handler that answers later registers here what to do if the client
// disconnects first (the server then drops the eventual answer).
using OnClientGone = std::function<void(std::function<void()>)>;
using Handler = std::function<void(HttpRequest, Respond, OnClientGone)>;

HttpResponse jsonError(int status, const std::string& error, const std::string& detail);

} // namespace hwfarm::api
