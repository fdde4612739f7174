// What the route files (router.cpp, routes_*.cpp) share: the answer
// helpers. Internal to daemon/api/: nothing outside the route files
// includes it.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "config/echo.h"
#include "daemon/api/handlers.h"
#include "daemon/api/json_codec.h"
#include "daemon/api/status_http.h"

namespace hwfarm::api {
namespace json = boost::json;

inline HttpResponse okText(std::string body, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

inline HttpResponse ok(const json::value& body, int status = 200) { return okText(toJson(body), status); }

// Since when the tier is what it is (SlaPolicy::effectiveSinceMs): null when
// unknown (0).
inline json::value tierSince(int64_t unix_ms) {
  return unix_ms > 0 ? json::value(rfc3339(unix_ms)) : json::value(nullptr);
}

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

// The query parameter `key`, percent-decoded (the first if repeated), or "".
inline std::string queryValue(const Target& target, std::string_view key) {
  for (const auto& [k, v] : target.query)
    if (k == key) return percentDecode(v);
  return {};
}

// The uploaded image's original file name (?name=, percent-encoded), or "".
inline std::string uploadName(const Target& target) { return queryValue(target, "name"); }

} // namespace hwfarm::api
