// JSON shapes of the API (docs/api.md): parsing requests strictly and
// rendering boards, leases and the queue.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json/fwd.hpp>

#include <boost/json/object.hpp>

#include "common/status.h"
#include "config/fleet_config.h"
#include "daemon/core/lease/scheduler.h"

namespace hwfarm::api {

// "2026-11-30T16:02:24.123Z"
std::string rfc3339(int64_t unix_ms);
// The same text in place (no allocation), for the hot renderers.
class Rfc3339 {
 public:
  explicit Rfc3339(int64_t unix_ms);
  std::string_view view() const { return {text_, sizeof text_}; }

 private:
  char text_[24];
};

// Request bodies parse into a value, or Code::invalid_argument whose message
// is the 400 detail saying why not (naming the field).

// A JSON body parsed into an object.
Result<boost::json::object> parseObject(const std::string& body);

struct AcquireRequest {
  lease::LeaseRequest request;
  int64_t wait_ms = 0;
};

// Validates a POST /v1/leases body. Unknown fields, wrong types, missing
// fields and out-of-range values are errors naming the field.
Result<AcquireRequest> parseAcquire(const std::string& body, const config::Limits& limits,
                                    const config::LeaseConfig& leases);

// Validates a renew body (may be empty: keep the lease's TTL).
Result<int64_t> parseRenew(const std::string& body, const config::Limits& limits, int64_t current_ttl_ms);

// A maintenance body: {"reason": "..."} or empty.
Result<std::string> parseReason(const std::string& body);

// A POST /v1/tier/pin body: {"tier": 1..3, "reason": "..."}, both required
// (the reason at most 256 characters).
struct PinRequest {
  int tier = 0;
  std::string reason;
};
Result<PinRequest> parsePin(const std::string& body);

class JsonWriter;

// `v` as JSON text written by JsonWriter, so that it is valid UTF-8 whatever
// its strings hold (Boost.JSON's serializer copies invalid UTF-8 unchanged).
// Every answer the router builds as a DOM goes through this.
std::string toJson(const boost::json::value& v);
void writeJson(JsonWriter& w, const boost::json::value& v);

// A lease as the API shows it (JSON text; rendered on every acquire, renew
// and release, so written directly rather than through a DOM).
std::string leaseJson(const lease::Lease& lease, const lease::Scheduler& scheduler);
void writeLease(JsonWriter& w, const lease::Lease& lease, const lease::Scheduler& scheduler);
void writeSelector(JsonWriter& w, const lease::Selector& selector);
void writeQueueEntry(JsonWriter& w, const lease::LeaseRequest& request, size_t position, int64_t now_ms,
                     int64_t aging_ms);
boost::json::object boardJson(const config::WorkerConfig& worker, const config::BoardConfig& board,
                              const lease::Board* runtime);

} // namespace hwfarm::api
