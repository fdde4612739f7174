// The HTTP/1.1 server: Beast on the daemon's io_context, one coroutine-free
// async session per connection, no thread per connection. Beast and Asio
// stay inside server.cpp.
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

class HttpServer {
 public:
  // `handler` is called on the io_context thread for every complete request.
  HttpServer(boost::asio::io_context& io, config::Limits limits, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting. Returns the bound address as a URL
  // ("http://127.0.0.1:7420", "unix:/run/hwfarm/hwfarmd.sock"); throws
  // std::runtime_error naming the address on failure (start-up only).
  std::string listen(const config::ListenAddress& address);

  // Stops accepting and closes idle connections; requests in progress finish
  // and their connections close after the response. `drained` (optional) is
  // posted to the io_context once no connection is left.
  void stop(std::function<void()> drained = {});

  void setLimits(const config::Limits& limits);
  // Decides, per request head, where its body goes (http_types.h). Without
  // one every body is read into memory up to limits.max_body_bytes.
  void setBodyPolicy(BodyPolicy policy);
  size_t connectionCount() const;

  struct Impl; // opaque; public so server.cpp's session types can name it

 private:
  std::shared_ptr<Impl> impl_;
};

} // namespace hwfarm::api
