// The one mapping from a Status code to an HTTP answer, checked against the
// table users read in docs/api.md.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "daemon/api/status_http.h"

using namespace hwfarm;

namespace {

// docs/api.md's text.
std::string apiDoc() {
  std::ifstream in(std::string(HWFARM_SOURCE_DIR) + "/docs/api.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("every error code answers the status and name docs/api.md gives it") {
  // Given the codes a refusal can carry and the row docs/api.md shows for each
  struct Row {
    Code code;
    const char* doc; // the table's row
    int status;
    const char* error;
  };
  const Row rows[] = {
      {Code::invalid_argument, "| invalid argument | 400 | `invalid_request` |", 400, "invalid_request"},
      {Code::not_found, "| not found | 404 | `not_found` |", 404, "not_found"},
      {Code::busy, "| busy (another operation runs) | 409 | `busy` |", 409, "busy"},
      {Code::unsupported, "| unsupported (the board cannot) | 409 | `not_supported` |", 409, "not_supported"},
      {Code::conflict, "| conflict (the state does not allow it) | 409 | `conflict` |", 409, "conflict"},
      {Code::permission_denied, "| permission denied | 403 | `forbidden` |", 403, "forbidden"},
      {Code::too_large, "| too large | 413 | `payload_too_large` |", 413, "payload_too_large"},
      {Code::timeout, "| timeout | 408 | `timeout` |", 408, "timeout"},
      {Code::unavailable, "| unavailable | 503 | `unavailable` |", 503, "unavailable"},
      {Code::io_error, "| I/O error | 500 | `storage_error` |", 500, "storage_error"},
      {Code::no_space,
       "| no space (the state dir's disk is full, or would keep less than `limits.disk_reserve_bytes` free) | 507 | "
       "`insufficient_storage` |",
       507, "insufficient_storage"},
      {Code::internal, "| internal | 500 | `internal_error` |", 500, "internal_error"},
  };
  std::string doc = apiDoc();
  REQUIRE(!doc.empty());
  for (const Row& row : rows) {
    INFO(codeName(row.code));
    // When the code is mapped
    api::HttpError e = api::httpError(row.code);
    // Then it is the documented status and name
    CHECK(e.status == row.status);
    CHECK(e.error == row.error);
    CHECK(doc.find(row.doc) != std::string::npos);
  }
}

TEST_CASE("an error answer carries the mapping's status and name and the status's message as its detail") {
  // Given a refusal with a message a client should read
  Status busy = Status::error(Code::busy, "board nucleo-1 is being flashed");
  // When it is answered
  api::HttpResponse r = api::errorResponse(busy);
  // Then the status, the name and the detail are those of the mapping and the message
  CHECK(r.status == 409);
  auto body = boost::json::parse(r.body).as_object();
  CHECK(body.at("error").as_string() == "busy");
  CHECK(body.at("detail").as_string() == "board nucleo-1 is being flashed");
}
