#include "daemon/cli/http_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace hwfarm::cli {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

constexpr const char* kUrlForms = "expected http://HOST:PORT, https://HOST[:PORT] or unix:/PATH";
// What one read takes from a connection at most.
constexpr size_t kReadBytes = 64 * 1024;

} // namespace

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

HttpClient::HttpClient(const std::string& url, double timeout_s, std::string cacert, Cancellation* cancellation)
    : cacert_(std::move(cacert)), timeout_s_(timeout_s), cancellation_(cancellation) {
  if (url.rfind("unix:", 0) == 0) {
    unix_path_ = url.substr(5);
    if (unix_path_.empty()) throw std::invalid_argument("empty unix socket path in \"" + url + "\"");
    return;
  }
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  } else if (rest.rfind("https://", 0) == 0) {
    rest = rest.substr(8);
    tls_ = true;
  } else {
    throw std::invalid_argument(std::string(kUrlForms) + ", got \"" + url + "\"");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  bool bracketed = !rest.empty() && rest.front() == '[';
  if (colon == std::string::npos || (bracketed && rest.back() == ']')) {
    // https://HOST: the default port 443
    if (!tls_ || rest.empty() || rest.find('/') != std::string::npos)
      throw std::invalid_argument(std::string(kUrlForms) + ", got \"" + url + "\"");
    host_ = rest;
    port_ = "443";
  } else {
    if (rest.find('/') != std::string::npos)
      throw std::invalid_argument(std::string(kUrlForms) + ", got \"" + url + "\"");
    host_ = rest.substr(0, colon);
    port_ = rest.substr(colon + 1);
  }
  if (host_.size() > 2 && host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
}

std::string HttpClient::where() const {
  if (!unix_path_.empty()) return "unix:" + unix_path_;
  std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return (tls_ ? "https://" : "http://") + host + ":" + port_;
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

bool isIpAddress(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// TLS 1.2 or later, the server's certificate verified against `cacert` (a
// PEM file of CA certificates) or, when empty, the system's CA store.
std::unique_ptr<ssl::context> clientContext(const std::string& cacert) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (cacert.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) throw TlsRefused("cannot load the system's CA certificates: " + ec.message());
    return ctx;
  }
  std::string what = "cannot use the CA file " + cacert + " (--cacert, $HWFARM_CACERT): ";
  int fd = ::open(cacert.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TlsRefused(what + std::strerror(errno));
  ::close(fd);
  ctx->load_verify_file(cacert, ec);
  if (ec) throw TlsRefused(what + "no PEM certificate in it");
  return ctx;
}

// The server's name is checked by OpenSSL itself (a DNS name or an IP
// address in the certificate's subjectAltName), so a mismatch is reported
// as such; SNI carries a DNS name.
void expectServer(TlsStream& stream, const std::string& host) {
  SSL* ssl = stream.native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (isIpAddress(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
    SSL_set_tlsext_host_name(ssl, host.c_str());
  }
}

// Why the handshake with `where` failed, for a person: an untrusted or
// misnamed certificate, or no TLS at all.
std::string tlsFailure(SSL* ssl, const boost::system::error_code& ec, const std::string& where,
                       const std::string& cacert) {
  long verify = SSL_get_verify_result(ssl);
  std::string trust = cacert.empty() ? "the system's CA store (or --cacert FILE, $HWFARM_CACERT)"
                                     : "the CA file " + cacert;
  if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
    return "refusing " + where + ": its certificate is not issued for that name (" +
           X509_verify_cert_error_string(verify) + ")";
  if (verify != X509_V_OK)
    return "refusing " + where + ": its certificate is not trusted: " + X509_verify_cert_error_string(verify) +
           " (verified against " + trust + ")";
  return "TLS handshake with " + where + " failed: " + ec.message() + " (is it an https:// address?)";
}

// Connects `stream` to `endpoints` and, over TLS, verifies the server.
template <class Stream, class Endpoints>
asio::awaitable<void> connectTo(Stream& stream, const Endpoints& endpoints, const std::string& where,
                           const std::string& cacert) {
  co_await beast::get_lowest_layer(stream).async_connect(endpoints, asio::use_awaitable);
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    auto [ec] = co_await stream.async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
    if (ec) throw TlsRefused(tlsFailure(stream.native_handle(), ec, where, cacert));
  }
}

struct Target {
  std::string where;  // for messages: "https://lab-01:7443"
  std::string host;   // the Host header
  std::string cacert; // TLS: the CA file, or empty for the system's store
};

// A connection to hwfarmd over a unix socket, TCP or TLS, behind one type:
// the HTTP exchanges below are compiled once, not once per kind of stream
// (Beast's coroutines over a TLS stream alone took most of this file's
// compile time). An asynchronous read or write stream for Beast: a read
// fills the first non-empty buffer of its sequence, which a read_some may;
// a write sends the first non-empty buffer, or, when that is small (a
// request's header is a buffer per field), the sequence's first bytes
// gathered into one: a request takes one system call, not one per field.
class Connection {
public:
  using executor_type = asio::any_io_executor;
  using Done = std::function<void(boost::system::error_code, std::size_t)>;

  virtual ~Connection() = default;
  virtual executor_type get_executor() = 0;
  // Connects and, over TLS, verifies the server.
  virtual asio::awaitable<void> connect(const Target& t) = 0;
  virtual void expiresAfter(std::chrono::milliseconds timeout) = 0;
  virtual void expiresNever() = 0;
  virtual void cancel() = 0;
  virtual void readSome(asio::mutable_buffer buffer, Done done) = 0;
  virtual void writeSome(asio::const_buffer buffer, Done done) = 0;

  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, asio::mutable_buffer b) { readSome(b, shared(std::move(handler))); }, token,
        first<asio::mutable_buffer>(buffers));
  }
  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, asio::const_buffer b) { writeSome(b, shared(std::move(handler))); }, token,
        gathered(buffers));
  }

private:
  static constexpr size_t kGather = 16 * 1024;
  // The first non-empty buffer when it is large, else the sequence's first
  // bytes (up to kGather) copied into gather_, which stays untouched until
  // the write completes (one write at a time on a connection).
  template <class Buffers>
  asio::const_buffer gathered(const Buffers& buffers) {
    asio::const_buffer head = first<asio::const_buffer>(buffers);
    if (head.size() >= kGather / 4) return head;
    gather_.resize(kGather);
    size_t n = asio::buffer_copy(asio::buffer(gather_), buffers);
    return asio::const_buffer(gather_.data(), n);
  }
  std::vector<char> gather_;

  template <class Buffer, class Buffers>
  static Buffer first(const Buffers& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it)
      if (Buffer b(*it); b.size() > 0) return b;
    return Buffer{};
  }
  // A completion handler may be move-only; Done is copyable.
  template <class Handler>
  static Done shared(Handler handler) {
    auto h = std::make_shared<Handler>(std::move(handler));
    return [h](boost::system::error_code ec, std::size_t n) { std::move (*h)(ec, n); };
  }
};

template <class Stream, class Endpoints>
class ConnectionOver final : public Connection {
public:
  template <class... Args>
  explicit ConnectionOver(Endpoints endpoints, Args&&... args)
      : stream_(std::forward<Args>(args)...), endpoints_(std::move(endpoints)) {}
  Stream& stream() { return stream_; }
  executor_type get_executor() override { return stream_.get_executor(); }
  asio::awaitable<void> connect(const Target& t) override {
    co_await connectTo(stream_, endpoints_, t.where, t.cacert);
  }
  void expiresAfter(std::chrono::milliseconds timeout) override {
    beast::get_lowest_layer(stream_).expires_after(timeout);
  }
  void expiresNever() override { beast::get_lowest_layer(stream_).expires_never(); }
  void cancel() override { beast::get_lowest_layer(stream_).cancel(); }
  void readSome(asio::mutable_buffer buffer, Done done) override {
    stream_.async_read_some(buffer, std::move(done));
  }
  void writeSome(asio::const_buffer buffer, Done done) override {
    stream_.async_write_some(buffer, std::move(done));
  }

private:
  Stream stream_;
  Endpoints endpoints_;
};

// Beast's stream timeouts apply to asynchronous operations only, so the
// exchange is a coroutine run to completion on a private io_context.
asio::awaitable<HttpResult> exchange(Connection& stream, Target t, std::string method, std::string target,
                                     std::string body, std::string token, std::chrono::milliseconds timeout,
                                     std::string content_type) {
  stream.expiresAfter(timeout);
  co_await stream.connect(t);
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, t.host.empty() ? "localhost" : t.host);
  request.set(http::field::user_agent, "hwfarmctl");
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  if (!body.empty() || content_type != "application/json") request.set(http::field::content_type, content_type);
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  buffer.reserve(kReadBytes); // else each read takes 512 bytes
  // An upload asks first (Expect: 100-continue): a refusal (401, 413, ...)
  // then comes before the body is sent, not as a reset in the middle of it.
  bool ask = content_type == "application/octet-stream";
  if (ask) request.set(http::field::expect, "100-continue");
  http::request_serializer<http::string_body> serializer{request};
  // A server may answer before it has read the whole request (a plain
  // request to an https:// address, a refusal) and close: a write that
  // fails so is followed by reading that answer, which is the error to show.
  boost::system::error_code write_ec;
  co_await http::async_write_header(stream, serializer, asio::redirect_error(asio::use_awaitable, write_ec));
  if (!write_ec && ask) {
    http::response_parser<http::string_body> interim;
    interim.body_limit(64 * 1024 * 1024);
    co_await http::async_read(stream, buffer, interim, asio::use_awaitable);
    if (interim.get().result() != http::status::continue_)
      co_return HttpResult{static_cast<int>(interim.get().result_int()), interim.get().body()};
  }
  if (!write_ec) co_await http::async_write(stream, serializer, asio::redirect_error(asio::use_awaitable, write_ec));
  if (write_ec && write_ec != asio::error::broken_pipe && write_ec != asio::error::connection_reset)
    throw boost::system::system_error(write_ec);
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  boost::system::error_code read_ec;
  co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, read_ec));
  if (read_ec) throw boost::system::system_error(write_ec ? write_ec : read_ec);
  co_return HttpResult{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

HttpResult runToCompletion(asio::io_context& io, asio::awaitable<HttpResult> awaitable) {
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

// The connection `t` names: a unix socket, TCP, or TLS over TCP (its
// context kept in `context`), not yet connected.
std::unique_ptr<Connection> connection(asio::io_context& io, const Target& t, const std::string& unix_path,
                                       const std::string& port, bool tls,
                                       std::unique_ptr<ssl::context>& context) {
  if (!unix_path.empty()) {
    using Local = asio::local::stream_protocol;
    return std::make_unique<ConnectionOver<beast::basic_stream<Local>, Local::endpoint>>(Local::endpoint(unix_path),
                                                                                         io);
  }
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(t.host, port);
  using Endpoints = decltype(endpoints);
  if (!tls) return std::make_unique<ConnectionOver<beast::tcp_stream, Endpoints>>(endpoints, io);
  context = clientContext(t.cacert);
  auto c = std::make_unique<ConnectionOver<TlsStream, Endpoints>>(endpoints, io, *context);
  expectServer(c->stream(), t.host);
  return c;
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
    Target t{where(), host_, cacert_};
    std::unique_ptr<ssl::context> context;
    auto c = connection(io, t, unix_path_, port_, tls_, context);
    return runToCompletion(io, exchange(*c, t, method, target, body, token, timeout, content_type));
  } catch (const boost::system::system_error& e) {
    throw Unreachable("cannot reach hwfarmd at " + where() + ": " + e.code().message());
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

asio::awaitable<HttpResult> streamExchange(Connection& stream, Target t, std::string target,
                                           std::string token, std::chrono::milliseconds connect_timeout,
                                           const std::function<void(const std::string&)>* on_data,
                                           asio::signal_set* signals, std::chrono::milliseconds idle) {
  SignalWaitEnd signal_wait_end{signals};
  stream.expiresAfter(connect_timeout);
  co_await stream.connect(t);
  // Each step gets `idle` from its start, or no limit.
  auto limit = [&] {
    if (idle.count() > 0) stream.expiresAfter(idle);
    else stream.expiresNever();
  };
  limit();
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, t.host.empty() ? "localhost" : t.host);
  request.set(http::field::user_agent, "hwfarmctl");
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  co_await http::async_write(stream, request, asio::use_awaitable);
  beast::flat_buffer buffer;
  buffer.reserve(kReadBytes); // else each read takes 512 bytes
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  limit();
  co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
  std::string error_body;
  while (!parser.is_done()) {
    char chunk[kReadBytes];
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    // read_some, not read: a console prints a line at a time, and each must
    // reach on_data when it arrives, not once 8 KiB have gathered.
    limit();
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
                       int* stopped_by, double idle_s) const {
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
    Target t{where(), host_, cacert_};
    std::unique_ptr<ssl::context> context;
    auto c = connection(io, t, unix_path_, port_, tls_, context);
    cancel = [&c] { c->cancel(); };
    HttpResult r = runToCompletion(
        io, streamExchange(*c, t, target, token, timeout, &on_data, signals ? &*signals : nullptr,
                           std::chrono::milliseconds(static_cast<int64_t>(idle_s * 1000))));
    if (r.status >= 300) *error_body = r.body;
    return r.status;
  } catch (const boost::system::system_error& e) {
    if (stopped_by && *stopped_by) return 0;
    throw Unreachable("cannot reach hwfarmd at " + where() + ": " + e.code().message());
  }
}

} // namespace hwfarm::cli
