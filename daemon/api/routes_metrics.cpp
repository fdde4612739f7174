// GET /metrics: the Prometheus text rendered by metrics.cpp.
#include "daemon/api/metrics.h"
#include "daemon/api/routes.h"

namespace hwfarm::api {

void Router::metrics(Call& c) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = renderMetrics(state_, leases_, responses_);
  c.respond(r);
}

} // namespace hwfarm::api
