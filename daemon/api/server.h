// The HTTP/1.1 server: Beast on the daemon's io_context, one coroutine-free
// async session per connection, no thread per connection; HTTPS on the
// https:// listeners. Beast and Asio stay inside server.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/fleet_config.h"
#include "daemon/api/http_types.h"

namespace boost::asio {
class io_context;
}

namespace hwfarm::api {

class TlsIdentity;

// What /metrics shows about the server.
struct ServerStats {
  size_t connections = 0;         // open connections (not counting 503-rejected ones)
  size_t streams = 0;             // open streamed responses (console readers)
  uint64_t stream_bytes_queued = 0; // bytes held for streamed responses, not yet sent
  uint64_t accept_errors = 0;     // failed accept() calls since start
  int64_t max_connections = 0;    // limits.max_connections as applied (after the descriptor check)
};

class HttpServer {
 public:
  // `handler` is called on the io_context thread for every complete request.
  // `own_descriptors` is what the daemon needs besides connections (database,
  // consoles, children's pipes): limits.max_connections is fitted under
  // RLIMIT_NOFILE minus that (see setLimits). Throws std::runtime_error when
  // not even one connection fits.
  HttpServer(boost::asio::io_context& io, config::Limits limits, Handler handler, size_t own_descriptors = 64);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting. Returns the bound address as a URL
  // ("http://127.0.0.1:7420", "https://[::]:7443",
  // "unix:/run/hwfarm/hwfarmd.sock"); throws std::runtime_error naming the
  // address on failure (start-up only), and for an https:// address before
  // setTlsIdentity. A unix
  // socket file at the path is removed only when nothing accepts on it (left
  // by a killed daemon); if a connect to it succeeds, this throws instead.
  std::string listen(const config::ListenAddress& address);

  // The certificate and key new HTTPS connections get; connections open
  // keep the one they started with, so a reload drops none.
  void setTlsIdentity(const std::shared_ptr<const TlsIdentity>& identity);

  // Stops accepting and closes idle connections; requests in progress finish
  // and their connections close after the response. `drained` (optional) is
  // posted to the io_context once no connection is left.
  void stop(std::function<void()> drained = {});

  // Applies new limits. Raises the soft RLIMIT_NOFILE (up to the hard one)
  // when max_connections + own_descriptors does not fit it; if it still does
  // not fit, serves at most RLIMIT_NOFILE - own_descriptors connections and
  // logs a warning saying so. When no connection fits at all, the connection
  // limit stays as it was and an error is logged (the constructor throws).
  void setLimits(const config::Limits& limits);
  // Decides, per request head, where its body goes (http_types.h). Without
  // one every body is read into memory up to limits.max_body_bytes.
  void setBodyPolicy(BodyPolicy policy);
  size_t connectionCount() const;
  ServerStats stats() const;

  struct Impl; // opaque; public so server.cpp's session types can name it

 private:
  std::shared_ptr<Impl> impl_;
};

} // namespace hwfarm::api
