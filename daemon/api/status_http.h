// How a Status answers over HTTP (docs/api.md, "Errors"): the one mapping
// from a Code to an HTTP status and an `error` name. A route that must
// answer a code otherwise (a lease queue that is full is 503 queue_full, not
// 409 busy) says so where it answers, and docs/api.md lists it as an
// exception.
#pragma once

#include <string_view>

#include "common/status.h"
#include "daemon/api/http_types.h"

namespace hwfarm::api {

struct HttpError {
  int status;
  std::string_view error;
};

// invalid_argument 400 invalid_request, not_found 404 not_found, busy 409
// busy, unsupported 409 not_supported, conflict 409 conflict,
// permission_denied 403 forbidden, too_large 413 payload_too_large, timeout
// 408 timeout, unavailable 503 unavailable, io_error 500 storage_error,
// internal (and ok, which is no error) 500 internal_error.
HttpError httpError(Code code);

// The error answer for a failed `status`: the mapping's status and name,
// its message as the detail.
HttpResponse errorResponse(const Status& status);

} // namespace hwfarm::api
