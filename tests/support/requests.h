// Test support: the request bodies the lease tests send, over a socket
// (lease_api_test) or to the handlers in process (lease_routes_test).
#pragma once

#include <string>

#include <boost/json.hpp>

namespace hwfarm::test {

// A POST /v1/leases body for `count` mps2-an385 boards, with a holder; an
// idempotency key when `key` is not empty.
inline std::string acquireBody(int count = 1, double ttl_s = 60, double wait_s = 0,
                               const std::string& context = "manual", const std::string& key = "") {
  boost::json::object body{{"selector", boost::json::object{{"type", "mps2-an385"}}},
                           {"count", count},
                           {"ttl_s", ttl_s},
                           {"wait_s", wait_s},
                           {"context", context},
                           {"holder", boost::json::object{{"job", "tvm/PR-1"}, {"build", "7"}, {"stage", "hw"}}}};
  if (!key.empty()) body["idempotency_key"] = key;
  return boost::json::serialize(body);
}

} // namespace hwfarm::test
