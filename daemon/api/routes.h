// What the route files (router.cpp, routes_*.cpp) share: the answer
// helpers and Router::Call, one request on its way through the routes.
// Internal to daemon/api/: nothing outside the route files includes it.
#pragma once

#include <cctype>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "config/echo.h"
#include "daemon/api/json_codec.h"
#include "daemon/api/router.h"

namespace hwfarm::api {
namespace json = boost::json;

inline HttpResponse okText(std::string body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

inline HttpResponse ok(const json::value& body, int status = 200) { return okText(toJson(body), status); }

// A value from the request (a path, an id from the URL) in a message:
// escaped and bounded (config/echo.h).
inline std::string echoed(std::string_view s) { return config::echo(s); }

inline std::string percentDecode(const std::string& text) {
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
inline std::string uploadName(const Target& target) {
  for (const auto& [k, v] : target.query)
    if (k == "name") return percentDecode(v);
  return {};
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

struct Router::Call {
  HttpRequest request;
  Target target;
  Reply respond;
  std::optional<Principal> principal;

  // Answers 401/403 unless the caller has at least `role`.
  bool allowed(config::Role role) {
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

} // namespace hwfarm::api
