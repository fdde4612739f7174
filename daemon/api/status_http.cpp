#include "daemon/api/status_http.h"

#include <string>

namespace hwfarm::api {

HttpError httpError(Code code) {
  switch (code) {
    case Code::invalid_argument: return {400, "invalid_request"};
    case Code::not_found: return {404, "not_found"};
    case Code::busy: return {409, "busy"};
    case Code::unsupported: return {409, "not_supported"};
    case Code::conflict: return {409, "conflict"};
    case Code::permission_denied: return {403, "forbidden"};
    case Code::too_large: return {413, "payload_too_large"};
    case Code::timeout: return {408, "timeout"};
    case Code::unavailable: return {503, "unavailable"};
    case Code::io_error: return {500, "storage_error"};
    case Code::no_space: return {507, "insufficient_storage"};
    case Code::ok:
    case Code::internal: return {500, "internal_error"};
  }
  return {500, "internal_error"};
}

HttpResponse errorResponse(const Status& status) {
  HttpError e = httpError(status.code());
  return jsonError(e.status, std::string(e.error), status.message());
}

} // namespace hwfarm::api
