// Transport-neutral HTTP request/response, so handlers are plain functions
// testable without a socket. Only api/server.cpp knows about Beast.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hwfarm::api {

struct HttpRequest {
  std::string method; // "GET", "POST", ...
  std::string target; // path and query, e.g. "/v1/boards?all=1"
  std::string body;
  std::string authorization; // the Authorization header, may be empty
  std::string content_type;  // the Content-Type header, may be empty
  bool local_peer = false;   // loopback TCP or unix socket

  // A body the server spooled to a file (BodyPlan::Kind::file) instead of
  // `body`. The file exists only while the handler runs: the server removes
  // it when the handler returns, so a handler that keeps it renames it.
  struct Upload {
    std::string path;
    std::string sha256; // lower-case hex of the bytes
    uint64_t bytes = 0;
  };
  std::optional<Upload> upload;
};

// The sending end of a streamed (chunked) response body.
struct StreamSink {
  virtual ~StreamSink() = default;
  // Queues a chunk; false once the client has gone.
  virtual bool write(std::string data) = 0;
  // Ends the body; the connection closes after it.
  virtual void end() = 0;
  // `on_gone` runs once if the client disconnects before end().
  virtual void onGone(std::function<void()> on_gone) = 0;
  // Bytes written and not yet sent to the client: the memory this stream
  // holds. Past a cap (4 MiB) write() cuts the client off.
  virtual size_t queued() const = 0;
  // `on_drained` runs each time everything written has been sent. A writer
  // with more to say than it should queue (a backlog file) writes a piece,
  // then waits for this.
  virtual void onDrained(std::function<void()> on_drained) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: the body is streamed. After the headers are sent, `stream` gets the
  // sink and writes the body through it (`body` is sent as the first chunk).
  std::function<void(std::shared_ptr<StreamSink>)> stream;
};

// One request's answer channel. Handlers answer through respond(), now or
// later (long-poll), exactly once; answers after the client left are dropped.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // False when the answer was dropped (client gone, or answered already).
  virtual bool respond(HttpResponse response) = 0;
  // A handler that answers later registers here what to do if the client
  // disconnects first.
  virtual void onClientGone(std::function<void()> hook) = 0;
};
using Handler = std::function<void(HttpRequest, std::shared_ptr<Exchange>)>;

// Where a request's body goes, decided from its head (method, target,
// headers; `body` still empty) before any of the body is read, so a client
// that may not upload is answered without sending its body.
struct BodyPlan {
  enum class Kind {
    memory, // into HttpRequest::body, up to limits.max_body_bytes
    file,   // streamed into a new file in `dir` and hashed (HttpRequest::upload)
    refuse, // `refusal` is answered and the connection closes, body unread
  };
  Kind kind = Kind::memory;
  uint64_t limit = 0;     // Kind::file: the most bytes accepted (HTTP 413 above it)
  std::string limit_name; // Kind::file: the config key of `limit`, named in the 413
  std::string dir;        // Kind::file: an existing directory
  // Kind::file: the free space the body never takes (limits.
  // disk_reserve_bytes): a body that would is refused with 507.
  uint64_t reserve = 0;
  HttpResponse refusal;   // Kind::refuse
};
using BodyPolicy = std::function<BodyPlan(const HttpRequest& head)>;

HttpResponse jsonError(int status, const std::string& error, const std::string& detail);

} // namespace hwfarm::api
