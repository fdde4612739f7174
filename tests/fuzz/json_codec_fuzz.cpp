// Fuzz target: the API's JSON body decoders (daemon/api/json_codec.h) on one
// body each: parseAcquire, parseRenew, parseReason, parsePin and parseObject.
// Invariants: a refusal always says why; an accepted lease request is within
// the limits it was checked against, and what the API would echo of it
// (selector, holder) renders as JSON that parses back to the same strings.
#include <cstdint>
#include <string>

#include <boost/json.hpp>

#include "daemon/api/json_codec.h"
#include "daemon/api/json_writer.h"
#include "tests/fuzz/fuzz_check.h"

using namespace hwfarm;
namespace json = boost::json;

namespace {

void checkAcquire(const std::string& body, const config::Limits& limits, const config::LeaseConfig& leases) {
  Result<api::AcquireRequest> r = api::parseAcquire(body, limits, leases);
  if (!r) {
    FUZZ_CHECK(r.status().is(Code::invalid_argument) && !r.status().message().empty(),
               "parseAcquire refused without a reason");
    return;
  }
  const lease::LeaseRequest& q = r->request;
  FUZZ_CHECK(q.count >= 1 && q.count <= limits.max_count, "count %d", q.count);
  FUZZ_CHECK(q.ttl_ms >= 1 && q.ttl_ms <= static_cast<int64_t>(limits.max_ttl_s * 1000), "ttl_ms %lld",
             static_cast<long long>(q.ttl_ms));
  FUZZ_CHECK(r->wait_ms >= 0 && r->wait_ms <= static_cast<int64_t>(limits.max_wait_s * 1000), "wait_ms %lld",
             static_cast<long long>(r->wait_ms));
  FUZZ_CHECK(q.priority >= -100 && q.priority <= 100, "priority %d", q.priority);
  FUZZ_CHECK(!q.selector.type.empty() || !q.selector.labels.empty(), "selector without type or labels");

  api::JsonWriter w;
  w.beginObject().key("selector");
  api::writeSelector(w, q.selector);
  w.member("job", q.holder.job).member("build", q.holder.build).member("stage", q.holder.stage);
  w.member("url", q.holder.url).member("idempotency_key", q.idempotency_key).endObject();
  boost::system::error_code ec;
  json::value back = json::parse(w.take(), ec);
  FUZZ_CHECK(!ec, "rendered request does not parse: %s", ec.message().c_str());
  const json::object& o = back.as_object();
  FUZZ_CHECK(o.at("selector").at("type").as_string() == q.selector.type, "selector.type changed");
  FUZZ_CHECK(o.at("selector").at("labels").as_array().size() == q.selector.labels.size(), "labels changed");
  FUZZ_CHECK(o.at("job").as_string() == q.holder.job, "holder.job changed");
  FUZZ_CHECK(o.at("url").as_string() == q.holder.url, "holder.url changed");
  FUZZ_CHECK(o.at("idempotency_key").as_string() == q.idempotency_key, "idempotency_key changed");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  config::Limits limits;
  config::LeaseConfig leases;
  checkAcquire(body, limits, leases);
  limits.max_count = 1;
  limits.max_ttl_s = 1;
  limits.max_wait_s = 0;
  leases.default_ttl_s = 0.5; // the loader keeps it within max_ttl_s
  checkAcquire(body, limits, leases);

  if (Result<int64_t> ttl = api::parseRenew(body, limits, 1234)) {
    FUZZ_CHECK(*ttl >= 1, "renew ttl %lld", static_cast<long long>(*ttl));
    FUZZ_CHECK(*ttl == 1234 || *ttl <= static_cast<int64_t>(limits.max_ttl_s * 1000), "renew ttl %lld",
               static_cast<long long>(*ttl));
  } else {
    FUZZ_CHECK(!ttl.status().message().empty(), "parseRenew refused without a reason");
  }
  if (Result<std::string> reason = api::parseReason(body))
    FUZZ_CHECK(reason->size() <= 256, "reason of %zu", reason->size());
  else FUZZ_CHECK(!reason.status().message().empty(), "parseReason refused without a reason");
  if (Result<api::PinRequest> pin = api::parsePin(body))
    FUZZ_CHECK(pin->tier >= 1 && pin->tier <= 3 && !pin->reason.empty() && pin->reason.size() <= 256, "pin tier %d",
               pin->tier);
  else FUZZ_CHECK(!pin.status().message().empty(), "parsePin refused without a reason");
  if (Result<json::object> o = api::parseObject(body); !o)
    FUZZ_CHECK(!o.status().message().empty(), "parseObject refused without a reason");
  return 0;
}
