#include "daemon/cli/http_client.h"

#include <csignal>
#include <optional>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace hwfarm::cli {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

void Cancellation::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  if (stop_) stop_();
}

bool Cancellation::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

bool Cancellation::attach(std::function<void()> stop) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_) return false;
  stop_ = std::move(stop);
  return true;
}

void Cancellation::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = nullptr;
}

HttpClient::HttpClient(const std::string& url, double timeout_s, Cancellation* cancellation)
    : timeout_s_(timeout_s), cancellation_(cancellation) {
  if (url.rfind("unix:", 0) == 0) {
    unix_path_ = url.substr(5);
    if (unix_path_.empty()) throw std::invalid_argument("empty unix socket path in \"" + url + "\"");
    return;
  }
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else throw std::invalid_argument("expected http://HOST:PORT or unix:/PATH, got \"" + url + "\"");
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.find('/') != std::string::npos)
    throw std::invalid_argument("expected http://HOST:PORT or unix:/PATH, got \"" + url + "\"");
  host_ = rest.substr(0, colon);
  if (host_.size() > 2 && host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
  port_ = rest.substr(colon + 1);
}

namespace {

bool hasControl(const std::string& text, bool space_too) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f || (space_too && c == ' ')) return true;
  return false;
}

// Header values and the request line are written as given: CR or LF in
// them would add headers (or a second request).
void checkRequest(const std::string& target, const std::string& token) {
  if (hasControl(target, true))
    throw UnsafeRequest("the request path contains a space or a control character (CR, LF, ...); nothing was sent");
  if (hasControl(token, false))
    throw UnsafeRequest("the token contains a control character (CR, LF, ...); nothing was sent");
}

// Beast's stream timeouts apply to asynchronous operations only, so the
// exchange is a coroutine run to completion on a private io_context.
template <class Stream, class Endpoint>
asio::awaitable<HttpResult> exchange(Stream& stream, Endpoint endpoint, std::string host,
                                     std::string method, std::string target, std::string body,
                                     std::string token, std::chrono::milliseconds timeout,
                                     std::string content_type) {
  stream.expires_after(timeout);
  co_await stream.async_connect(endpoint, asio::use_awaitable);
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, host.empty() ? "localhost" : host);
  request.set(http::field::user_agent, "hwfarmctl");
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  if (!body.empty() || content_type != "application/json") request.set(http::field::content_type, content_type);
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  // An upload asks first (Expect: 100-continue): a refusal (401, 413, ...)
  // then comes before the body is sent, not as a reset in the middle of it.
  bool ask = content_type == "application/octet-stream";
  if (ask) request.set(http::field::expect, "100-continue");
  http::request_serializer<http::string_body> serializer{request};
  co_await http::async_write_header(stream, serializer, asio::use_awaitable);
  if (ask) {
    http::response_parser<http::string_body> interim;
    interim.body_limit(64 * 1024 * 1024);
    co_await http::async_read(stream, buffer, interim, asio::use_awaitable);
    if (interim.get().result() != http::status::continue_)
      co_return HttpResult{static_cast<int>(interim.get().result_int()), interim.get().body()};
  }
  co_await http::async_write(stream, serializer, asio::use_awaitable);
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
  co_return HttpResult{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

template <class Awaitable>
HttpResult runToCompletion(asio::io_context& io, Awaitable awaitable) {
  std::optional<HttpResult> result;
  std::exception_ptr error;
  asio::co_spawn(io, std::move(awaitable), [&](std::exception_ptr e, HttpResult r) {
    error = e;
    if (!e) result = std::move(r);
  });
  io.run();
  if (error) std::rethrow_exception(error);
  if (!result) throw Cancelled("the request was cancelled"); // io.stop() from Cancellation
  return std::move(*result);
}



} // namespace

HttpResult HttpClient::request(const std::string& method, const std::string& target,
                               const std::string& body, const std::string& token,
                               const std::string& content_type) const {
  checkRequest(target, token);
  asio::io_context io;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  // io_context::stop is safe from any thread; the streams below are
  // destroyed (their sockets closed) when this returns.
  if (cancellation_ && !cancellation_->attach([&io] { io.stop(); })) throw Cancelled("the request was cancelled");
  struct Detach {
    Cancellation* c;
    ~Detach() {
      if (c) c->detach();
    }
  } detach{cancellation_};
  try {
    if (!unix_path_.empty()) {
      beast::basic_stream<asio::local::stream_protocol> stream(io);
      return runToCompletion(io, exchange(stream, asio::local::stream_protocol::endpoint(unix_path_), "",
                                          method, target, body, token, timeout, content_type));
    }
    asio::ip::tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(host_, port_);
    beast::tcp_stream stream(io);
    return runToCompletion(io, exchange(stream, endpoints, host_, method, target, body, token, timeout, content_type));
  } catch (const boost::system::system_error& e) {
    std::string where = unix_path_.empty() ? host_ + ":" + port_ : "unix:" + unix_path_;
    throw Unreachable("cannot reach hwfarmd at " + where + ": " + e.code().message());
  }
}

namespace {

// Cancels the stop-signal wait when the exchange ends, however it ends, so
// that io.run() returns.
struct SignalWaitEnd {
  asio::signal_set* signals;
  ~SignalWaitEnd() {
    boost::system::error_code ignored;
    if (signals) signals->cancel(ignored);
  }
};

template <class Stream, class Endpoint>
asio::awaitable<HttpResult> streamExchange(Stream& stream, Endpoint endpoint, std::string host, std::string target,
                                           std::string token, std::chrono::milliseconds connect_timeout,
                                           const std::function<void(const std::string&)>* on_data,
                                           asio::signal_set* signals) {
  SignalWaitEnd signal_wait_end{signals};
  stream.expires_after(connect_timeout);
  co_await stream.async_connect(endpoint, asio::use_awaitable);
  stream.expires_never();
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, host.empty() ? "localhost" : host);
  request.set(http::field::user_agent, "hwfarmctl");
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  co_await http::async_write(stream, request, asio::use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
  std::string error_body;
  while (!parser.is_done()) {
    char chunk[8192];
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    // read_some, not read: a console prints a line at a time, and each must
    // reach on_data when it arrives, not once 8 KiB have gathered.
    auto [ec, n] = co_await http::async_read_some(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (ec && ec != http::error::need_buffer) throw boost::system::system_error(ec);
    std::string piece(chunk, sizeof chunk - parser.get().body().size);
    if (parser.get().result_int() >= 300) error_body += piece;
    else if (!piece.empty()) (*on_data)(piece);
  }
  co_return HttpResult{static_cast<int>(parser.get().result_int()), error_body};
}

} // namespace

int HttpClient::stream(const std::string& target, const std::string& token,
                       const std::function<void(const std::string&)>& on_data, std::string* error_body,
                       int* stopped_by) const {
  checkRequest(target, token);
  asio::io_context io;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  // SIGINT/SIGTERM end the stream like its end: what arrived is with on_data.
  std::optional<asio::signal_set> signals;
  std::function<void()> cancel;
  if (stopped_by) {
    *stopped_by = 0;
    signals.emplace(io, SIGINT, SIGTERM);
    signals->async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      *stopped_by = signal;
      if (cancel) cancel();
    });
  }
  try {
    HttpResult r;
    if (!unix_path_.empty()) {
      beast::basic_stream<asio::local::stream_protocol> s(io);
      cancel = [&s] { s.cancel(); };
      r = runToCompletion(io, streamExchange(s, asio::local::stream_protocol::endpoint(unix_path_), "", target, token,
                                             timeout, &on_data, signals ? &*signals : nullptr));
    } else {
      asio::ip::tcp::resolver resolver(io);
      auto endpoints = resolver.resolve(host_, port_);
      beast::tcp_stream s(io);
      cancel = [&s] { s.cancel(); };
      r = runToCompletion(io, streamExchange(s, endpoints, host_, target, token, timeout, &on_data,
                                             signals ? &*signals : nullptr));
    }
    if (r.status >= 300) *error_body = r.body;
    return r.status;
  } catch (const boost::system::system_error& e) {
    if (stopped_by && *stopped_by) return 0;
    std::string where = unix_path_.empty() ? host_ + ":" + port_ : "unix:" + unix_path_;
    throw Unreachable("cannot reach hwfarmd at " + where + ": " + e.code().message());
  }
}

} // namespace hwfarm::cli
