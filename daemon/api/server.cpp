#include "daemon/api/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <deque>
#include <list>
#include <optional>
#include <stdexcept>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace hwfarm::api {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kMaxQueuedStreamBytes = 4 * 1024 * 1024; // per streamed response

// The response head is written by hand: a header name or value with CR or
// LF would add headers of its own. Such a header is left out (and logged).
bool safeHeader(const std::string& name, const std::string& value) {
  bool safe = name.find_first_of("\r\n:") == std::string::npos && value.find_first_of("\r\n") == std::string::npos;
  if (!safe) spdlog::error("response header {:?} not sent: its name or value holds CR, LF or ':'", name);
  return safe;
}

} // namespace

using Clock = std::chrono::steady_clock;

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void closeIfIdle() = 0;
  // Acts on a deadline that has passed.
  virtual void sweep(Clock::time_point now) = 0;
};

// How often deadlines are checked: timeouts fire up to this much late.
constexpr auto kSweepInterval = std::chrono::milliseconds(100);

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io_context, config::Limits l, Handler h)
      : io(io_context), limits(l), handler(std::move(h)), sweeper(io_context) {}

  asio::io_context& io;
  config::Limits limits;
  Handler handler;
  bool stopping = false;
  size_t live = 0; // sessions alive, including rejected ones
  std::function<void()> on_drained;
  std::list<std::weak_ptr<SessionBase>> sessions;
  std::vector<std::unique_ptr<tcp::acceptor>> tcp_acceptors;
  std::vector<std::unique_ptr<local::acceptor>> unix_acceptors;
  std::vector<std::string> unix_paths;

  asio::steady_timer sweeper;
  bool sweeping = false;

  template <class Protocol>
  void accept(typename Protocol::acceptor& acceptor);
  // Runs the sweeper while any session has a deadline.
  void armSweeper() {
    if (sweeping) return;
    sweeping = true;
    sweeper.expires_after(kSweepInterval);
    sweeper.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      self->sweeping = false;
      if (ec) return;
      auto now = Clock::now();
      bool any = false;
      for (auto& weak : self->sessions)
        if (auto session = weak.lock()) {
          session->sweep(now);
          any = true;
        }
      for (auto& weak : self->rejected)
        if (auto session = weak.lock()) {
          session->sweep(now);
          any = true;
        }
      self->reap();
      if (any) self->armSweeper();
    });
  }
  void reap() {
    sessions.remove_if([](const std::weak_ptr<SessionBase>& s) { return s.expired(); });
    rejected.remove_if([](const std::weak_ptr<SessionBase>& s) { return s.expired(); });
  }
  std::list<std::weak_ptr<SessionBase>> rejected; // over limits.max_connections, answered 503
};

namespace {

template <class Protocol>
bool isLocal(const typename Protocol::socket& socket) {
  if constexpr (std::is_same_v<Protocol, tcp>) {
    boost::system::error_code ec;
    auto endpoint = socket.remote_endpoint(ec);
    if (ec) return false;
    auto address = endpoint.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped())
      return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).is_loopback();
    return address.is_loopback();
  } else {
    return true;
  }
}

template <class Protocol>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Protocol>> {
 public:
  enum class Wait { none, idle, request, write }; // what the deadline is for

  Session(typename Protocol::socket socket, std::shared_ptr<HttpServer::Impl> server)
      : local_(isLocal<Protocol>(socket)),
        socket_(std::move(socket)),
        server_(std::move(server)) {
    ++server_->live;
  }

  ~Session() override {
    if (--server_->live == 0 && server_->stopping && server_->on_drained)
      asio::post(server_->io, std::exchange(server_->on_drained, {}));
  }

  void start(bool reject) {
    if (reject) {
      keep_alive_ = false;
      return write(jsonError(503, "too_many_connections",
                             "connection limit (limits.max_connections) reached; retry later"));
    }
    waitForRequest();
  }

  void sweep(Clock::time_point now) override {
    if (waiting_ == Wait::none || now < deadline_) return;
    Wait what = std::exchange(waiting_, Wait::none);
    if (what == Wait::request) {
      // A slow client deserves a 408 it can read: the read fails, onRead answers.
      timed_out_ = true;
      boost::system::error_code ignored;
      socket_.cancel(ignored);
    } else {
      close(); // idle keep-alive connection, or a client that does not read its answer
    }
  }

  void closeIfIdle() override {
    closing_ = true;
    if (!busy_) {
      boost::system::error_code ec;
      socket_.shutdown(Protocol::socket::shutdown_both, ec);
      close();
    }
  }

 private:
  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }
  void expireIn(Wait what, double seconds) {
    waiting_ = what;
    deadline_ = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
    server_->armSweeper();
  }

  // Phase 1: an idle connection waits up to idle_timeout_s for the first
  // byte of the next request.
  void waitForRequest() {
    if (closing_) return close();
    if (buffer_.size() > 0) return readRequest();
    expireIn(Wait::idle, server_->limits.idle_timeout_s);
    socket_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
      self->waiting_ = Wait::none;
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->readRequest();
    });
  }

  // Phase 2: the whole request (headers and body) within header_timeout_s.
  void readRequest() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(static_cast<uint64_t>(server_->limits.max_body_bytes));
    timed_out_ = false;
    expireIn(Wait::request, server_->limits.header_timeout_s);
    http::async_read(socket_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->waiting_ = Wait::none;
                       self->onRead(ec);
                     });
  }

  void onRead(beast::error_code ec) {
    if (ec && timed_out_) ec = beast::error::timeout;
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return close();
    if (ec) {
      keep_alive_ = false;
      if (ec == http::error::body_limit)
        return write(jsonError(413, "payload_too_large",
                               "request body exceeds " + std::to_string(server_->limits.max_body_bytes) +
                                   " bytes (limits.max_body_bytes)"));
      if (ec == http::error::header_limit)
        return write(jsonError(431, "headers_too_large", "request headers exceed 16384 bytes"));
      if (ec == beast::error::timeout)
        return write(jsonError(408, "request_timeout",
                               "request not complete within limits.header_timeout_s"));
      if (ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
        return close();
      return write(jsonError(400, "bad_request", "malformed HTTP request: " + ec.message()));
    }
    auto& message = parser_->get();
    keep_alive_ = message.keep_alive();
    http10_ = message.version() == 10;
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.body = std::move(message.body());
    request.authorization = std::string(message[http::field::authorization]);
    request.local_peer = local_;
    busy_ = true;
    responded_ = false;
    server_->handler(std::move(request), std::make_shared<Answer>(this->shared_from_this(), ++exchange_));
  }

  // The answer channel of one request; stale once the session moved on.
  class Answer : public Exchange {
   public:
    Answer(std::shared_ptr<Session> session, uint64_t exchange) : session_(std::move(session)), exchange_(exchange) {}
    bool respond(HttpResponse response) override {
      Session& s = *session_;
      if (s.gone_ || s.responded_ || s.exchange_ != exchange_) return false;
      s.responded_ = true;
      if (s.watching_) {
        beast::error_code ignored;
        s.socket_.cancel(ignored); // the close watch
      }
      s.write(std::move(response));
      return true;
    }
    void onClientGone(std::function<void()> hook) override {
      // The answer will wait (a queued lease request): notice the client
      // hanging up meanwhile. Answers that only wait for a commit do not pay
      // for the watch.
      Session& s = *session_;
      if (s.exchange_ != exchange_) return;
      s.gone_hook_ = std::move(hook);
      if (!s.responded_ && !s.watching_ && !s.gone_) s.watchForClose();
    }

   private:
    std::shared_ptr<Session> session_;
    uint64_t exchange_;
  };

  // While a long-poll answer is pending, notice the client hanging up.
  void watchForClose() {
    watching_ = true;
    socket_.async_wait(Protocol::socket::wait_read,
                                [self = this->shared_from_this()](beast::error_code ec) {
                                  self->watching_ = false;
                                  if (ec || (self->responded_ && !self->streaming_)) return;
                                  char byte;
                                  ssize_t n = ::recv(self->socket_.native_handle(), &byte, 1,
                                                     MSG_PEEK | MSG_DONTWAIT);
                                  if (n > 0) return; // a pipelined request: read after the answer
                                  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return self->watchForClose();
                                  self->gone_ = true;
                                  if (auto hook = std::exchange(self->gone_hook_, {})) hook();
                                  self->busy_ = false;
                                  self->close();
                                });
  }

  // A chunked body fed by the handler through a StreamSink.
  class Sink : public StreamSink {
   public:
    explicit Sink(std::shared_ptr<Session> session) : session_(std::move(session)) {}
    bool write(std::string data) override {
      if (session_->gone_ || ended_ || data.empty()) return !session_->gone_;
      // A reader that does not keep up is cut off rather than buffered for.
      if (session_->queued_bytes_ > kMaxQueuedStreamBytes) {
        session_->gone_ = true;
        boost::system::error_code ignored;
        session_->socket_.shutdown(Protocol::socket::shutdown_both, ignored);
        return false;
      }
      if (session_->http10_) { // no chunked encoding in HTTP/1.0: the close ends the body
        session_->queueRaw(std::move(data));
        return true;
      }
      char size[20];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      session_->queueRaw(size + data + "\r\n");
      return true;
    }
    void end() override {
      if (ended_) return;
      ended_ = true;
      if (!session_->http10_) session_->queueRaw("0\r\n\r\n");
      session_->close_after_queue_ = true;
      session_->flushQueue();
    }
    void onGone(std::function<void()> on_gone) override { session_->gone_hook_ = std::move(on_gone); }

   private:
    std::shared_ptr<Session> session_;
    bool ended_ = false;
  };

  void startStream(HttpResponse response) {
    if (!safeHeader("Content-Type", response.content_type)) response.content_type = "application/octet-stream";
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " OK\r\nServer: hwfarmd\r\nContent-Type: " +
                       response.content_type + "\r\n" + (http10_ ? "" : "Transfer-Encoding: chunked\r\n") +
                       "Connection: close\r\n";
    for (const auto& [name, value] : response.headers)
      if (safeHeader(name, value)) head += name + ": " + value + "\r\n";
    queueRaw(head + "\r\n");
    auto sink = std::make_shared<Sink>(this->shared_from_this());
    if (!response.body.empty()) sink->write(std::move(response.body));
    streaming_ = true;
    watchForClose();
    response.stream(sink);
  }

  void queueRaw(std::string data) {
    queued_bytes_ += data.size();
    queue_.push_back(std::move(data));
    flushQueue();
  }

  void flushQueue() {
    if (writing_ || gone_) return;
    if (queue_.empty()) {
      if (close_after_queue_) {
        boost::system::error_code ignored;
        socket_.shutdown(Protocol::socket::shutdown_send, ignored);
        close();
      }
      return;
    }
    writing_ = true;
    auto data = std::make_shared<std::string>(std::move(queue_.front()));
    queue_.pop_front();
    queued_bytes_ -= data->size();
    asio::async_write(socket_, asio::buffer(*data),
                      [self = this->shared_from_this(), data](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        if (ec) {
                          self->gone_ = true;
                          if (auto hook = std::exchange(self->gone_hook_, {})) hook();
                          return self->close();
                        }
                        self->flushQueue();
                      });
  }

  // The head is written by hand and sent with the body in one gather write:
  // Beast's serializer costs more than the rest of a lease request.
  void write(HttpResponse response) {
    if (response.stream) return startStream(std::move(response));
    busy_ = true;
    bool keep_alive = keep_alive_ && !closing_;
    struct Out {
      std::string head;
      std::string body;
    };
    auto out = std::make_shared<Out>();
    out->body = std::move(response.body);
    std::string& head = out->head;
    head.reserve(160);
    head += "HTTP/1.1 ";
    head += std::to_string(response.status);
    head += ' ';
    head += http::obsolete_reason(static_cast<http::status>(response.status));
    head += "\r\nServer: hwfarmd\r\nContent-Type: ";
    head += safeHeader("Content-Type", response.content_type) ? response.content_type : "application/octet-stream";
    head += "\r\nContent-Length: ";
    head += std::to_string(out->body.size());
    head += "\r\n";
    if (!keep_alive) head += "Connection: close\r\n";
    else if (http10_) head += "Connection: keep-alive\r\n"; // HTTP/1.0 closes unless told
    for (const auto& [name, value] : response.headers) {
      if (!safeHeader(name, value)) continue;
      head += name;
      head += ": ";
      head += value;
      head += "\r\n";
    }
    head += "\r\n";
    expireIn(Wait::write, server_->limits.idle_timeout_s);
    std::array<asio::const_buffer, 2> buffers{asio::buffer(out->head), asio::buffer(out->body)};
    asio::async_write(socket_, buffers, [self = this->shared_from_this(), out, keep_alive](beast::error_code ec, size_t) {
      self->waiting_ = Wait::none;
      self->busy_ = false;
      if (ec || !keep_alive) {
        boost::system::error_code ignored;
        self->socket_.shutdown(Protocol::socket::shutdown_send, ignored);
        return self->close();
      }
      self->waitForRequest();
    });
  }

  bool local_;
  typename Protocol::socket socket_;
  std::shared_ptr<HttpServer::Impl> server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  // Timeouts are deadlines the server's sweeper checks (HttpServer::Impl::sweep):
  // no timer operation per request.
  Wait waiting_ = Wait::none;
  Clock::time_point deadline_{};
  std::function<void()> gone_hook_;
  std::deque<std::string> queue_; // raw bytes of a streamed response
  bool writing_ = false;
  bool streaming_ = false;
  size_t queued_bytes_ = 0;
  bool close_after_queue_ = false;
  bool responded_ = false;
  uint64_t exchange_ = 0; // numbers the requests of this connection
  bool http10_ = false;    // the request was HTTP/1.0
  bool watching_ = false;
  bool gone_ = false;
  bool timed_out_ = false;
  bool keep_alive_ = true;
  bool busy_ = false;
  bool closing_ = false;
};

} // namespace

template <class Protocol>
void HttpServer::Impl::accept(typename Protocol::acceptor& acceptor) {
  acceptor.async_accept([self = shared_from_this(), &acceptor](boost::system::error_code ec,
                                                               typename Protocol::socket socket) {
    if (self->stopping || ec == asio::error::operation_aborted) return;
    if (!ec) {
      self->reap();
      bool reject = self->sessions.size() >= static_cast<size_t>(self->limits.max_connections);
      auto session = std::make_shared<Session<Protocol>>(std::move(socket), self);
      (reject ? self->rejected : self->sessions).push_back(session);
      session->start(reject);
    } else {
      spdlog::warn("accept failed: {}", ec.message());
    }
    self->accept<Protocol>(acceptor);
  });
}

HttpServer::HttpServer(asio::io_context& io, config::Limits limits, Handler handler)
    : impl_(std::make_shared<Impl>(io, limits, std::move(handler))) {}

HttpServer::~HttpServer() {
  stop();
  impl_->on_drained = nullptr; // sessions may outlive us inside the io_context
}

std::string HttpServer::listen(const config::ListenAddress& address) {
  boost::system::error_code ec;
  if (address.kind == config::ListenAddress::Kind::unix_socket) {
    struct stat st {};
    // A socket left behind by a killed daemon; the state-dir lock already
    // guarantees no other hwfarmd of this config is running.
    if (lstat(address.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(address.path.c_str());
    auto acceptor = std::make_unique<local::acceptor>(impl_->io);
    acceptor->open(local(), ec);
    if (!ec) acceptor->bind(local::endpoint(address.path), ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + address.text + ": " + ec.message());
    if (::chmod(address.path.c_str(), 0660) != 0)
      throw std::runtime_error("cannot listen on " + address.text + ": chmod 0660 " + address.path + ": " +
                               std::strerror(errno));
    impl_->unix_paths.push_back(address.path);
    impl_->accept<local>(*acceptor);
    impl_->unix_acceptors.push_back(std::move(acceptor));
    return "unix:" + address.path;
  }
  tcp::resolver resolver(impl_->io);
  auto results = resolver.resolve(address.host, std::to_string(address.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty())
    throw std::runtime_error("cannot listen on " + address.text + ": " + (ec ? ec.message() : "no address"));
  tcp::endpoint endpoint = results.begin()->endpoint();
  auto acceptor = std::make_unique<tcp::acceptor>(impl_->io);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + address.text + ": " + ec.message());
  tcp::endpoint bound = acceptor->local_endpoint();
  impl_->accept<tcp>(*acceptor);
  impl_->tcp_acceptors.push_back(std::move(acceptor));
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(bound.port());
}

void HttpServer::stop(std::function<void()> drained) {
  if (!impl_ || impl_->stopping) return;
  impl_->stopping = true;
  impl_->on_drained = std::move(drained);
  boost::system::error_code ec;
  for (auto& a : impl_->tcp_acceptors) a->close(ec);
  for (auto& a : impl_->unix_acceptors) a->close(ec);
  for (const auto& path : impl_->unix_paths) ::unlink(path.c_str());
  for (auto& weak : impl_->sessions)
    if (auto session = weak.lock()) session->closeIfIdle();
  impl_->reap();
  if (impl_->live == 0 && impl_->on_drained) asio::post(impl_->io, std::exchange(impl_->on_drained, {}));
}

void HttpServer::setLimits(const config::Limits& limits) { impl_->limits = limits; }

size_t HttpServer::connectionCount() const {
  impl_->reap();
  return impl_->sessions.size();
}

} // namespace hwfarm::api
