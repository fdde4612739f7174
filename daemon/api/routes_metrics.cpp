// GET /metrics: the Prometheus text rendered by metrics.cpp.
#include "daemon/api/metrics.h"
#include "daemon/api/routes.h"

namespace hwfarm::api {

void Handlers::metrics(Call& c, const std::map<int, uint64_t>& responses) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  if (sla_) sla_->tick(); // decisions due now first
  r.body = renderMetrics(state_, leases_, responses, runs_, sla_, uploads_);
  c.respond(r);
}

} // namespace hwfarm::api
