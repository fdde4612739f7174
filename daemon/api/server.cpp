#include "daemon/api/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <optional>
#include <stdexcept>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "config/tokens.h"
#include "daemon/api/session_phase.h"
#include "daemon/api/tls_identity.h"
#include "daemon/api/upload_spool.h"
#include "daemon/services/disk_room.h"

namespace hwfarm::api {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
using TlsSocket = ssl::stream<tcp::socket>;
// Connection deadlines are checked against the monotonic clock by the
// sweeper (not hwfarm's Clock, daemon/core/clock.h: these are the
// server's own timeouts, never part of a decision a test drives).
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kMaxQueuedStreamBytes = 4 * 1024 * 1024; // per streamed response

// A failed accept() (EMFILE, ENFILE, ENOBUFS...) is retried after this, not
// at once: the listening socket stays readable, so retrying at once spins.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// Failed accepts are logged at most once per interval, with a count.
constexpr auto kAcceptLogInterval = std::chrono::seconds(10);
// How often deadlines are checked: timeouts fire up to this much late.
constexpr auto kSweepInterval = std::chrono::milliseconds(100);

// The most connections that fit the descriptor limit beside `own` other
// descriptors, raising the soft RLIMIT_NOFILE toward the hard one first.
// Throws when not one fits.
int64_t fitConnections(int64_t wanted, size_t own, rlim_t* limit) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return wanted;
  rlim_t needed = static_cast<rlim_t>(wanted) + own;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < needed) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? needed : std::min(needed, rl.rlim_max);
    // Children inherit the raised soft limit.
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  *limit = rl.rlim_cur;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= needed) return wanted;
  if (rl.rlim_cur <= own)
    throw std::runtime_error("the descriptor limit (RLIMIT_NOFILE) is " + std::to_string(rl.rlim_cur) +
                             " and hwfarmd keeps " + std::to_string(own) +
                             " for its own files: no connection fits; raise LimitNOFILE= or ulimit -n");
  return static_cast<int64_t>(rl.rlim_cur - own);
}

// The response head is written by hand: a header name or value with CR or
// LF would add headers of its own. Such a header is left out (and logged).
bool safeHeader(const std::string& name, const std::string& value) {
  bool safe = name.find_first_of("\r\n:") == std::string::npos && value.find_first_of("\r\n") == std::string::npos;
  if (!safe) spdlog::error("response header {:?} not sent: its name or value holds CR, LF or ':'", name);
  return safe;
}

// The server's TLS context over an identity's OpenSSL context (which it
// shares: each takes a reference).
std::shared_ptr<ssl::context> asioContext(const TlsIdentity& identity) {
  SSL_CTX_up_ref(identity.context());
  return std::make_shared<ssl::context>(identity.context());
}

} // namespace

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // The server stops: an idle connection closes now, the others after
  // their answer.
  virtual void stopping() = 0;
  // Acts on a deadline that has passed.
  virtual void sweep(SteadyClock::time_point now) = 0;
};

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io_context, Handler h, size_t own)
      : io(io_context), handler(std::move(h)), own_descriptors(own), sweeper(io_context) {}

  asio::io_context& io;
  config::Limits limits; // max_connections as fitted to RLIMIT_NOFILE
  Handler handler;
  BodyPolicy body_policy;
  bool stopping = false;
  size_t live = 0; // sessions alive, including rejected ones
  std::function<void()> on_drained;
  std::list<std::weak_ptr<SessionBase>> sessions;
  std::list<std::weak_ptr<SessionBase>> rejected; // over limits.max_connections, answered 503
  std::vector<std::unique_ptr<tcp::acceptor>> tcp_acceptors;
  std::vector<std::unique_ptr<tcp::acceptor>> tls_acceptors;
  std::vector<std::unique_ptr<local::acceptor>> unix_acceptors;
  std::vector<std::string> unix_paths;
  size_t own_descriptors;
  // New TLS connections get the current one; a connection keeps the one it
  // started with (a certificate reload drops no connection).
  std::shared_ptr<ssl::context> tls_context;

  asio::steady_timer sweeper;
  bool sweeping = false;

  uint64_t accept_errors = 0;
  uint64_t accept_errors_unlogged = 0; // since the last report
  SteadyClock::time_point next_accept_log{};
  size_t streams = 0;        // streamed responses open
  uint64_t stream_bytes = 0; // queued for them, not yet sent
  int64_t requested_connections = 0;

  // At start-up a limit that fits no connection throws; on reload the
  // connection limit then stays as it was, with an error logged.
  void applyLimits(const config::Limits& next, bool startup) {
    int64_t fitted = limits.max_connections;
    rlim_t limit = 0;
    try {
      fitted = fitConnections(next.max_connections, own_descriptors, &limit);
    } catch (const std::runtime_error& e) {
      if (startup) throw;
      spdlog::error("{}; keeping max_connections = {}", e.what(), fitted);
      limit = 0; // said already
    }
    if (fitted < next.max_connections && limit != 0 &&
        (fitted != limits.max_connections || next.max_connections != requested_connections))
      spdlog::warn("limits.max_connections = {} does not fit the descriptor limit: RLIMIT_NOFILE is {} and hwfarmd "
                   "keeps {} for its own files; serving at most {} connections (raise LimitNOFILE= or ulimit -n)",
                   next.max_connections, limit, own_descriptors, fitted);
    requested_connections = next.max_connections;
    limits = next;
    limits.max_connections = fitted;
  }

  template <class Protocol>
  void accept(typename Protocol::acceptor& acceptor, bool tls);
  template <class Stream>
  void startSession(Stream stream, std::shared_ptr<ssl::context> context);
  template <class Protocol>
  void acceptFailed(typename Protocol::acceptor& acceptor, bool tls, const boost::system::error_code& ec);

  // Runs the sweeper while any session has a deadline.
  void armSweeper() {
    if (sweeping) return;
    sweeping = true;
    sweeper.expires_after(kSweepInterval);
    sweeper.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      self->sweeping = false;
      if (ec) return;
      auto now = SteadyClock::now();
      bool any = false;
      for (auto* list : {&self->sessions, &self->rejected})
        for (auto& weak : *list)
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
};

namespace {

template <class Stream>
constexpr bool kTls = std::is_same_v<Stream, TlsSocket>;

template <class Socket>
bool isLocal(const Socket& socket) {
  if constexpr (std::is_same_v<Socket, tcp::socket>) {
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

// One connection: HTTP/1.1 over a TCP socket, a unix socket or TLS over
// TCP. Its phase (session_phase.h) says what it is doing; to() is the only
// place that changes it, and arms the phase's deadline.
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, std::shared_ptr<HttpServer::Impl> server, std::shared_ptr<ssl::context> tls_context)
      : stream_(std::move(stream)),
        local_(isLocal(beast::get_lowest_layer(stream_))),
        server_(std::move(server)),
        tls_context_(std::move(tls_context)),
        phase_(kTls<Stream> ? Phase::handshake : Phase::idle) {
    ++server_->live;
  }

  ~Session() override {
    server_->stream_bytes -= queued_bytes_;
    if (counted_stream_) --server_->streams;
    if (--server_->live == 0 && server_->stopping && server_->on_drained)
      asio::post(server_->io, std::exchange(server_->on_drained, {}));
  }

  // Starts the connection; `reject`: it is over limits.max_connections and
  // gets a 503 (after the handshake, over TLS) instead of a request.
  void start(bool reject) {
    reject_ = reject;
    armDeadline();
    if constexpr (kTls<Stream>) {
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        self->onHandshake(ec);
      });
    } else {
      afterConnect();
    }
  }

  void sweep(SteadyClock::time_point now) override {
    if (deadline_ && now >= *deadline_) {
      deadline_.reset();
      to(SessionEvent::deadline);
    }
  }

  void stopping() override { to(SessionEvent::stopping); }

 private:
  // ---- the phase -------------------------------------------------------------

  // Moves to the phase `event` leads to (nextPhase) and does what entering
  // it needs besides the phase's own I/O, which the caller starts: arms the
  // deadline, cancels a timed-out read, closes a closed connection.
  void to(SessionEvent event) {
    std::optional<Phase> next = nextPhase(phase_, event, after_, kTls<Stream>);
    if (!next) {
      spdlog::error("HTTP connection: event {} in phase {}: closing it", eventName(event), phaseName(phase_));
      next = Phase::closed;
    }
    Phase from = std::exchange(phase_, *next);
    if (from == phase_) return;
    // The request keeps one deadline through "100 Continue" and its body.
    bool same_request = (from == Phase::continuing && phase_ == Phase::reading) ||
                        (from == Phase::reading && phase_ == Phase::continuing);
    if (!same_request) armDeadline();
    boost::system::error_code ignored;
    switch (phase_) {
      case Phase::read_timed_out:
        beast::get_lowest_layer(stream_).cancel(ignored); // the read fails; onRead answers 408
        break;
      case Phase::closed:
        closeSocket();
        runGoneHook();
        drained_hook_ = nullptr;
        break;
      case Phase::idle:
        if (server_->stopping) to(SessionEvent::stopping);
        break;
      default:
        break;
    }
  }

  // The deadline of the current phase from now; streams arm theirs per piece.
  void armDeadline() {
    double seconds = 0;
    switch (deadlineOf(phase_)) {
      case Deadline::none:
        deadline_.reset();
        return;
      case Deadline::per_write: // armed by each piece (flushQueue)
        return;
      case Deadline::header: seconds = server_->limits.header_timeout_s; break;
      case Deadline::idle: seconds = server_->limits.idle_timeout_s; break;
    }
    armDeadlineIn(seconds);
  }
  void armDeadlineIn(double seconds) {
    deadline_ = SteadyClock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
    server_->armSweeper();
  }

  // Whoever waits for this client's answer (a queued lease request, a
  // console stream) hears that it left, after this turn of the loop: never
  // from inside a Sink::write of its own.
  void runGoneHook() {
    if (auto hook = std::exchange(gone_hook_, {})) asio::post(server_->io, std::move(hook));
  }

  bool gone() const { return phase_ == Phase::closed || phase_ == Phase::tls_closing; }

  void closeSocket() {
    boost::system::error_code ignored;
    auto& socket = beast::get_lowest_layer(stream_);
    socket.shutdown(std::remove_reference_t<decltype(socket)>::shutdown_both, ignored);
    socket.close(ignored);
    deadline_.reset();
  }

  // ---- connecting --------------------------------------------------------------

  void onHandshake(beast::error_code ec) {
    if (phase_ != Phase::handshake) return; // timed out
    if (!ec) {
      to(SessionEvent::handshake_done);
      return afterConnect();
    }
    if (ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST)
      return refusePlainHttp();
    spdlog::debug("TLS handshake failed: {}", ec.message());
    to(SessionEvent::peer_gone);
  }

  // A plain HTTP request on an https:// listener: told so in plain HTTP.
  void refusePlainHttp() {
    HttpResponse r = jsonError(400, "https_required", "this address serves HTTPS only: use an https:// URL");
    auto text = std::make_shared<std::string>("HTTP/1.1 400 Bad Request\r\nServer: hwfarmd\r\nContent-Type: " +
                                              r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
                                              "\r\nConnection: close\r\n\r\n" + r.body);
    asio::async_write(beast::get_lowest_layer(stream_), asio::buffer(*text),
                      [self = this->shared_from_this(), text](beast::error_code ec, size_t) {
                        if (self->phase_ != Phase::handshake) return; // timed out: closed
                        if (ec) return self->to(SessionEvent::peer_gone);
                        // Closing with the rest of the request unread would
                        // send a reset, which may reach the client before it
                        // reads the answer: end the sending side, then read
                        // what the client still sends until it closes (at
                        // most 64 KiB, within the handshake's deadline).
                        boost::system::error_code ignored;
                        auto& socket = beast::get_lowest_layer(self->stream_);
                        socket.shutdown(std::remove_reference_t<decltype(socket)>::shutdown_send, ignored);
                        self->drainPlainHttp(std::make_shared<std::array<char, 4096>>(), 64 * 1024);
                      });
  }
  void drainPlainHttp(std::shared_ptr<std::array<char, 4096>> scratch, size_t left) {
    beast::get_lowest_layer(stream_).async_read_some(
        asio::buffer(*scratch), [self = this->shared_from_this(), scratch, left](beast::error_code ec, size_t n) {
          if (self->phase_ != Phase::handshake) return; // timed out: closed
          if (ec || n >= left) return self->to(SessionEvent::peer_gone);
          self->drainPlainHttp(scratch, left - n);
        });
  }

  void afterConnect() {
    if (!reject_) return waitForRequest();
    after_ = AfterAnswer::close;
    write(jsonError(503, "too_many_connections", "connection limit (limits.max_connections) reached; retry later"));
  }

  // ---- reading a request -------------------------------------------------------

  // Idle: a connection waits up to idle_timeout_s for the first byte of its
  // next request.
  void waitForRequest() {
    if (phase_ != Phase::idle) return; // closed on entering (the server stops)
    if (buffer_.size() > 0) return readRequest();
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
      if (self->phase_ != Phase::idle) return; // timed out: closed
      if (ec) return self->to(SessionEvent::peer_gone);
      self->buffer_.commit(n);
      self->readRequest();
    });
  }

  // Reading: the whole request (head and body) within header_timeout_s. The
  // head is read first: the body policy decides from it where the body goes
  // and how large it may be, or answers without reading it.
  void readRequest() {
    to(SessionEvent::request_started);
    head_.emplace();
    head_->header_limit(kHeaderLimit);
    head_->body_limit(boost::none); // checked against the plan's limit below
    spool_.reset();
    body_limit_ = static_cast<uint64_t>(server_->limits.max_body_bytes);
    body_limit_name_ = "limits.max_body_bytes";
    http::async_read_header(stream_, buffer_, *head_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->onHeader(ec);
    });
  }

  HttpRequest headOf(const http::request_header<>& message) const {
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.authorization = std::string(message[http::field::authorization]);
    request.content_type = std::string(message[http::field::content_type]);
    request.local_peer = local_;
    return request;
  }

  void onHeader(beast::error_code ec) {
    if (ec || phase_ != Phase::reading) return onRead(ec);
    BodyPlan plan;
    if (server_->body_policy) plan = server_->body_policy(headOf(head_->get()));
    if (plan.kind == BodyPlan::Kind::refuse) {
      after_ = AfterAnswer::drain;
      return write(std::move(plan.refusal));
    }
    if (plan.kind == BodyPlan::Kind::file) {
      body_limit_ = plan.limit;
      body_limit_name_ = plan.limit_name;
    }
    if (head_->content_length() && *head_->content_length() > body_limit_) {
      // An upload is drained: its client may send the body without waiting.
      after_ = plan.kind == BodyPlan::Kind::file ? AfterAnswer::drain : AfterAnswer::close;
      return write(tooLarge());
    }
    if (plan.kind == BodyPlan::Kind::file) {
      // A body the disk has no room for is refused before it is read.
      if (Status room = roomFor(plan.dir, head_->content_length().value_or(0), plan.reserve); !room.ok())
        return refuseUpload(room);
      std::string error;
      spool_ = std::make_unique<UploadSpool>();
      if (!spool_->open(plan.dir, plan.reserve, &error)) {
        spool_.reset();
        spdlog::error("cannot store an upload: {}", error);
        after_ = AfterAnswer::close;
        return write(jsonError(500, "storage_error", "cannot store the upload: " + error));
      }
    }
    auto& message = head_->get();
    bool expects = beast::iequals(message[http::field::expect], "100-continue") && !head_->is_done();
    if (!expects) return readBody();
    // The client waits for this before it sends its body.
    to(SessionEvent::continue_needed);
    auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    asio::async_write(stream_, asio::buffer(*interim), [self = this->shared_from_this(), interim](beast::error_code ec, size_t) {
      if (self->phase_ != Phase::continuing) return;
      if (ec) return self->to(SessionEvent::peer_gone);
      self->to(SessionEvent::continue_sent);
      self->readBody();
    });
  }

  void readBody() {
    if (spool_) {
      upload_.emplace(std::move(*head_));
      upload_->body_limit(body_limit_);
      return readUploadChunk();
    }
    parser_.emplace(std::move(*head_));
    parser_->body_limit(body_limit_);
    // A body that arrived with its head (most requests) is parsed here, with
    // no further asynchronous step.
    beast::error_code ec;
    while (!parser_->is_done() && buffer_.size() > 0) {
      size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) ec = {};
      if (ec || used == 0) break;
    }
    if (ec || parser_->is_done()) return onRead(ec);
    // Still the head's deadline: the whole request within header_timeout_s.
    http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->onRead(ec);
    });
  }

  // A spooled body: each step must arrive within header_timeout_s (a large
  // upload takes as long as it needs while it keeps moving). Memory per
  // upload stays one chunk.
  void readUploadChunk() {
    if (upload_->is_done()) return onUpload();
    auto& body = upload_->get().body();
    body.data = spool_->chunk();
    body.size = UploadSpool::kChunk;
    body.more = true;
    armDeadline();
    http::async_read_some(stream_, buffer_, *upload_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec == http::error::need_buffer) ec = {};
      if (ec || self->phase_ != Phase::reading) return self->onRead(ec); // the spool goes with the session
      size_t n = UploadSpool::kChunk - self->upload_->get().body().size;
      if (n == 0) return self->readUploadChunk();
      if (Status room = self->spool_->roomFor(n); !room.ok()) {
        self->spool_.reset();
        return self->refuseUpload(room);
      }
      if (int e = self->spool_->append(n)) {
        std::string error = "cannot write " + self->spool_->path() + ": " + std::strerror(e);
        spdlog::error("cannot store an upload: {}", error);
        self->spool_.reset();
        self->after_ = AfterAnswer::close;
        bool full = e == ENOSPC || e == EDQUOT;
        return self->write(jsonError(full ? 507 : 500, full ? "insufficient_storage" : "storage_error",
                                     "cannot store the upload: " + error));
      }
      self->readUploadChunk();
    });
  }

  // 507 for an upload the disk has no room for (roomFor, disk_room.h); the
  // rest of the body is drained unstored, then the connection closes.
  void refuseUpload(const Status& room) {
    spdlog::warn("upload refused: {}", room.message());
    after_ = AfterAnswer::drain;
    write(jsonError(507, "insufficient_storage", "cannot store the upload: " + room.message()));
  }

  void onUpload() {
    std::string error;
    std::string sha = spool_->finish(&error);
    if (sha.empty()) {
      spdlog::error("cannot store an upload: {}", error);
      spool_.reset();
      after_ = AfterAnswer::close;
      return write(jsonError(500, "storage_error", "cannot store the upload: " + error));
    }
    auto& message = upload_->get();
    HttpRequest request = headOf(message);
    request.upload = HttpRequest::Upload{spool_->path(), sha, spool_->bytes()};
    handOver(std::move(request), message.keep_alive(), message.version() == 10);
    spool_.reset(); // removes the file unless the handler took it
  }

  // A read ended: a complete request goes to the handler; a failure is
  // answered (408, 413, 431, 400) or closes the connection.
  void onRead(beast::error_code ec) {
    if (phase_ == Phase::closed) return;
    if (phase_ == Phase::read_timed_out) ec = beast::error::timeout;
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return to(SessionEvent::peer_gone);
    spool_.reset();
    if (ec) {
      after_ = AfterAnswer::close;
      if (ec == http::error::body_limit) return write(tooLarge());
      if (ec == http::error::header_limit)
        return write(jsonError(431, "headers_too_large", "request headers exceed 16384 bytes"));
      if (ec == beast::error::timeout)
        return write(jsonError(408, "request_timeout", "request not complete within limits.header_timeout_s"));
      if (ec == asio::error::operation_aborted || ec == asio::error::connection_reset || isTlsFailure(ec))
        return to(SessionEvent::peer_gone);
      return write(jsonError(400, "bad_request", "malformed HTTP request: " + ec.message()));
    }
    auto& message = parser_->get();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.body = std::move(message.body());
    request.authorization = std::string(message[http::field::authorization]);
    request.content_type = std::string(message[http::field::content_type]);
    request.local_peer = local_;
    handOver(std::move(request), message.keep_alive(), message.version() == 10);
  }

  HttpResponse tooLarge() const {
    return jsonError(413, "payload_too_large",
                     "request body exceeds " + std::to_string(body_limit_) + " bytes (" + body_limit_name_ + ")");
  }

  static bool isTlsFailure(const beast::error_code& ec) {
    return ec.category() == asio::error::get_ssl_category() || ec == ssl::error::stream_truncated;
  }

  // Answering: the handler has the request.
  void handOver(HttpRequest request, bool keep_alive, bool http10) {
    keep_alive_ = keep_alive;
    http10_ = http10;
    gone_hook_ = nullptr;
    to(SessionEvent::request_read);
    server_->handler(std::move(request), std::make_shared<Answer>(this->shared_from_this(), ++exchange_));
  }

  // ---- answering ---------------------------------------------------------------

  // The answer channel of one request; stale once the session moved on.
  class Answer : public Exchange {
   public:
    Answer(std::shared_ptr<Session> session, uint64_t exchange) : session_(std::move(session)), exchange_(exchange) {}
    bool respond(HttpResponse response) override {
      Session& s = *session_;
      if (!s.awaits(exchange_)) return false;
      if (s.phase_ == Phase::watching) s.stopWatching();
      s.gone_hook_ = nullptr; // a stream's handler sets its own (Sink::onGone)
      s.after_ = s.keep_alive_ ? AfterAnswer::next_request : AfterAnswer::close;
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
      if (s.phase_ == Phase::closed) return s.runGoneHook(); // left already
      if (s.phase_ != Phase::answering) return;
      s.to(SessionEvent::wait_watched);
      s.watch();
    }

   private:
    std::shared_ptr<Session> session_;
    uint64_t exchange_;
  };

  bool awaits(uint64_t exchange) const {
    return exchange == exchange_ && (phase_ == Phase::answering || phase_ == Phase::watching);
  }

  // While a long-poll answer is pending or a stream runs, a read notices the
  // client hanging up. What the client sends meanwhile is read, so that its
  // close is seen behind it: bytes of a pipelined request are kept for after
  // the answer (at most one whole request; more counts as leaving), bytes
  // sent to a stream are dropped.
  void watch() {
    uint64_t generation = ++watch_generation_;
    bool keep = phase_ == Phase::watching;
    auto space = std::make_shared<std::array<char, 4096>>();
    stream_.async_read_some(asio::buffer(*space), [self = this->shared_from_this(), generation, keep, space](
                                                      beast::error_code ec, size_t n) {
      // Kept even when the answer came meanwhile: they are the next request's.
      if (!ec && keep) {
        self->buffer_.commit(asio::buffer_copy(self->buffer_.prepare(n), asio::buffer(*space, n)));
      }
      if (generation != self->watch_generation_ || !self->watched()) return; // the answer came
      size_t most = kHeaderLimit + static_cast<size_t>(self->server_->limits.max_body_bytes);
      if (!ec && n > 0 && self->buffer_.size() <= most) return self->watch();
      self->to(SessionEvent::peer_gone);
    });
  }
  bool watched() const {
    return phase_ == Phase::watching || phase_ == Phase::streaming || phase_ == Phase::stream_ending;
  }
  // The answer is ready: the watch's read is cancelled (what it read so far
  // stays in buffer_).
  void stopWatching() {
    ++watch_generation_;
    boost::system::error_code ignored;
    beast::get_lowest_layer(stream_).cancel(ignored);
  }

  // Writing: the head is written by hand and sent with the body in one
  // gather write (Beast's serializer costs more than the rest of a lease
  // request). `after_` says what follows it.
  void write(HttpResponse response) {
    if (response.stream) return startStream(std::move(response));
    if (server_->stopping && after_ == AfterAnswer::next_request) after_ = AfterAnswer::close;
    to(SessionEvent::answer_ready);
    auto out = std::make_shared<std::pair<std::string, std::string>>(head(response), std::move(response.body));
    std::array<asio::const_buffer, 2> buffers{asio::buffer(out->first), asio::buffer(out->second)};
    asio::async_write(stream_, buffers, [self = this->shared_from_this(), out](beast::error_code ec, size_t) {
      if (self->phase_ != Phase::writing) return; // timed out: closed
      if (ec) return self->to(SessionEvent::peer_gone);
      self->written();
    });
  }

  std::string head(const HttpResponse& response) const {
    bool keep_alive = after_ == AfterAnswer::next_request;
    std::string head;
    head.reserve(160);
    head += "HTTP/1.1 ";
    head += std::to_string(response.status);
    head += ' ';
    head += http::obsolete_reason(static_cast<http::status>(response.status));
    head += "\r\nServer: hwfarmd\r\nContent-Type: ";
    head += safeHeader("Content-Type", response.content_type) ? response.content_type : "application/octet-stream";
    head += "\r\nContent-Length: ";
    head += std::to_string(response.body.size());
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
    return head;
  }

  // The answer (or the stream's rest) went out: the next request, the drain
  // of an unread upload, close_notify, or the close.
  void written() {
    if (after_ != AfterAnswer::next_request && !kTls<Stream>) {
      // The client sees the end of the answer even while it still sends.
      boost::system::error_code ignored;
      auto& socket = beast::get_lowest_layer(stream_);
      socket.shutdown(std::remove_reference_t<decltype(socket)>::shutdown_send, ignored);
    }
    to(SessionEvent::written);
    switch (phase_) {
      case Phase::idle: return waitForRequest();
      case Phase::draining: return drain();
      case Phase::tls_closing: return closeTls();
      default: return;
    }
  }

  // Draining: after an answer to an upload whose body was not read. A client
  // that did not wait for 100 Continue is still sending it, and closing with
  // unread data would reset the connection before it reads the answer.
  // Reads and drops until the client closes, within header_timeout_s.
  void drain() {
    auto sink = std::make_shared<std::array<char, 16384>>();
    stream_.async_read_some(asio::buffer(*sink), [self = this->shared_from_this(), sink](beast::error_code ec, size_t) {
      if (self->phase_ != Phase::draining) return;
      if (!ec) return self->drain();
      self->to(SessionEvent::peer_gone);
    });
  }

  // TLS: close_notify, so the client tells a complete answer from a cut one.
  void closeTls() {
    if constexpr (kTls<Stream>) {
      stopWatching(); // a stream's watch: the shutdown reads the client's close_notify itself
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        if (self->phase_ == Phase::tls_closing) self->to(SessionEvent::written);
      });
    }
  }

  // ---- streaming -----------------------------------------------------------------

  // A chunked body fed by the handler through a StreamSink.
  class Sink : public StreamSink {
   public:
    explicit Sink(std::shared_ptr<Session> session) : session_(std::move(session)) {}
    bool write(std::string data) override {
      Session& s = *session_;
      if (s.gone() || ended_ || data.empty()) return !s.gone();
      // A reader that does not keep up is cut off rather than buffered for.
      if (s.queued_bytes_ > kMaxQueuedStreamBytes) {
        s.to(SessionEvent::peer_gone);
        return false;
      }
      if (s.http10_) { // no chunked encoding in HTTP/1.0: the close ends the body
        s.queueRaw(std::move(data));
        return true;
      }
      char size[20];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      s.queueRaw(size + data + "\r\n");
      return true;
    }
    void end() override {
      Session& s = *session_;
      if (ended_ || s.gone()) return;
      ended_ = true;
      if (!s.http10_) s.queueRaw("0\r\n\r\n");
      s.to(SessionEvent::stream_ended);
      s.flushQueue();
    }
    void onGone(std::function<void()> on_gone) override {
      session_->gone_hook_ = std::move(on_gone);
      if (session_->phase_ == Phase::closed) session_->runGoneHook(); // left already
    }
    size_t queued() const override { return session_->queued_bytes_; }
    void onDrained(std::function<void()> on_drained) override {
      if (!session_->gone() && !ended_) session_->drained_hook_ = std::move(on_drained);
    }

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
    after_ = AfterAnswer::close;
    to(SessionEvent::stream_started);
    counted_stream_ = true;
    ++server_->streams;
    queueRaw(head + "\r\n");
    auto sink = std::make_shared<Sink>(this->shared_from_this());
    if (!response.body.empty()) sink->write(std::move(response.body));
    watch();
    response.stream(sink);
  }

  // queued_bytes_ counts a piece until it is sent, the one being written too.
  void queueRaw(std::string data) {
    queued_bytes_ += data.size();
    server_->stream_bytes += data.size();
    queue_.push_back(std::move(data));
    flushQueue();
  }

  // Writes the queue piece by piece. A piece the client does not take within
  // idle_timeout_s closes the connection (the deadline), so a reader that
  // stopped reading does not hold its stream open.
  void flushQueue() {
    if (in_flight_ || gone()) return;
    if (queue_.empty()) {
      if (phase_ == Phase::stream_ending) {
        drained_hook_ = nullptr;
        return written();
      }
      if (drained_hook_) {
        auto hook = drained_hook_; // may write more, or end the stream
        hook();
      }
      return;
    }
    in_flight_ = std::make_shared<std::string>(std::move(queue_.front()));
    queue_.pop_front();
    armDeadlineIn(server_->limits.idle_timeout_s);
    asio::async_write(stream_, asio::buffer(*in_flight_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      auto piece = std::exchange(self->in_flight_, nullptr);
      self->queued_bytes_ -= piece->size();
      self->server_->stream_bytes -= piece->size();
      if (self->gone()) return;
      self->deadline_.reset();
      if (ec) return self->to(SessionEvent::peer_gone);
      self->flushQueue();
    });
  }

  Stream stream_;
  bool local_;
  std::shared_ptr<HttpServer::Impl> server_;
  std::shared_ptr<ssl::context> tls_context_; // the one the connection started with (TLS only)
  Phase phase_;
  std::optional<SteadyClock::time_point> deadline_; // checked by the server's sweeper: no timer per request
  AfterAnswer after_ = AfterAnswer::next_request;    // what follows the answer being written
  bool reject_ = false;        // over limits.max_connections: answered 503
  // The request being answered (HTTP/1.0 has no chunked encoding and closes
  // unless told to keep alive).
  bool keep_alive_ = true;
  bool http10_ = false;
  uint64_t exchange_ = 0;      // numbers the requests of this connection
  uint64_t watch_generation_ = 0; // a watch's read that completes under an older one was cancelled

  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> head_;    // until the body plan is made
  std::optional<http::request_parser<http::string_body>> parser_;  // a body read into memory
  std::optional<http::request_parser<http::buffer_body>> upload_;  // a body spooled to a file
  std::unique_ptr<UploadSpool> spool_;
  uint64_t body_limit_ = 0;
  std::string body_limit_name_;
  std::function<void()> gone_hook_;
  std::function<void()> drained_hook_; // a stream's writer waiting for room
  std::deque<std::string> queue_;      // raw bytes of a streamed response
  std::shared_ptr<std::string> in_flight_; // the piece being written
  size_t queued_bytes_ = 0;
  bool counted_stream_ = false; // in server_->streams
};

} // namespace

template <class Stream>
void HttpServer::Impl::startSession(Stream stream, std::shared_ptr<ssl::context> context) {
  reap();
  bool reject = sessions.size() >= static_cast<size_t>(limits.max_connections);
  auto session = std::make_shared<Session<Stream>>(std::move(stream), shared_from_this(), std::move(context));
  (reject ? rejected : sessions).push_back(session);
  session->start(reject);
}

template <class Protocol>
void HttpServer::Impl::accept(typename Protocol::acceptor& acceptor, bool tls) {
  acceptor.async_accept([self = shared_from_this(), &acceptor, tls](boost::system::error_code ec,
                                                                    typename Protocol::socket socket) {
    if (self->stopping || ec == asio::error::operation_aborted) return;
    if (ec) return self->acceptFailed<Protocol>(acceptor, tls, ec);
    // Asio accepts without SOCK_CLOEXEC: no child may inherit a client.
    ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
    if constexpr (std::is_same_v<Protocol, tcp>) {
      if (tls) {
        std::shared_ptr<ssl::context> context = self->tls_context;
        if (context) {
          TlsSocket stream(std::move(socket), *context);
          self->startSession(std::move(stream), std::move(context));
        }
      } else {
        self->startSession(std::move(socket), nullptr);
      }
    } else {
      self->startSession(std::move(socket), nullptr);
    }
    self->accept<Protocol>(acceptor, tls);
  });
}

template <class Protocol>
void HttpServer::Impl::acceptFailed(typename Protocol::acceptor& acceptor, bool tls,
                                    const boost::system::error_code& ec) {
  ++accept_errors;
  auto now = SteadyClock::now();
  if (now >= next_accept_log) {
    if (accept_errors_unlogged == 0)
      spdlog::warn("accept failed: {}; retrying every {} ms (reported at most every {} s)", ec.message(),
                   kAcceptBackoff.count(), kAcceptLogInterval.count());
    else
      spdlog::warn("accept failed: {} ({} more failures since the last report)", ec.message(),
                   accept_errors_unlogged);
    accept_errors_unlogged = 0;
    next_accept_log = now + kAcceptLogInterval;
  } else {
    ++accept_errors_unlogged;
  }
  // A connection reset before it was accepted: nothing to wait for.
  if (ec == asio::error::connection_aborted) return accept<Protocol>(acceptor, tls);
  auto timer = std::make_shared<asio::steady_timer>(io, kAcceptBackoff);
  timer->async_wait([self = shared_from_this(), &acceptor, tls, timer](const boost::system::error_code& e) {
    if (e || self->stopping) return;
    self->accept<Protocol>(acceptor, tls);
  });
}

namespace {

// A socket file left behind by a killed daemon is removed; one that still
// accepts connections belongs to a running daemon (maybe with another
// state_dir, so the state-dir lock does not see it) and is left alone:
// throws. Anything else at the path is left for bind() to refuse.
void refuseLiveSocket(const config::ListenAddress& address) {
  struct stat st {};
  if (::lstat(address.path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (address.path.size() >= sizeof sun.sun_path) return; // bind() names the problem
  std::memcpy(sun.sun_path, address.path.c_str(), address.path.size() + 1);
  // Non-blocking: a live daemon with a full backlog answers EAGAIN instead of
  // blocking the start-up.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::runtime_error("cannot listen on " + address.text + ": " + std::strerror(errno));
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&sun), sizeof sun);
  int error = errno;
  ::close(fd);
  if (rc == 0)
    throw std::runtime_error("cannot listen on " + address.text +
                             ": another process is listening on it (another hwfarmd?); not taking it over");
  // ECONNREFUSED: nobody listens, the file is stale. EAGAIN: the listener's
  // backlog is full, so it is alive.
  if (error == EAGAIN)
    throw std::runtime_error("cannot listen on " + address.text +
                             ": another process is listening on it (another hwfarmd?); not taking it over");
  if (error == ECONNREFUSED) ::unlink(address.path.c_str());
}

} // namespace

HttpServer::HttpServer(asio::io_context& io, config::Limits limits, Handler handler, size_t own_descriptors)
    : impl_(std::make_shared<Impl>(io, std::move(handler), own_descriptors)) {
  impl_->applyLimits(limits, true);
}

HttpServer::~HttpServer() {
  stop();
  impl_->on_drained = nullptr; // sessions may outlive us inside the io_context
}

std::string HttpServer::listen(const config::ListenAddress& address) {
  boost::system::error_code ec;
  if (address.kind == config::ListenAddress::Kind::unix_socket) {
    refuseLiveSocket(address);
    auto acceptor = std::make_unique<local::acceptor>(impl_->io);
    acceptor->open(local(), ec);
    if (!ec) ::fcntl(acceptor->native_handle(), F_SETFD, FD_CLOEXEC); // Asio opens without SOCK_CLOEXEC
    if (!ec) acceptor->bind(local::endpoint(address.path), ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + address.text + ": " + ec.message());
    if (::chmod(address.path.c_str(), 0660) != 0)
      throw std::runtime_error("cannot listen on " + address.text + ": chmod 0660 " + address.path + ": " +
                               std::strerror(errno));
    impl_->unix_paths.push_back(address.path);
    impl_->accept<local>(*acceptor, false);
    impl_->unix_acceptors.push_back(std::move(acceptor));
    return "unix:" + address.path;
  }
  bool tls = address.kind == config::ListenAddress::Kind::tls;
  if (tls && !impl_->tls_context)
    throw std::runtime_error("cannot listen on " + address.text + ": no certificate (agent.tls_cert, agent.tls_key)");
  tcp::resolver resolver(impl_->io);
  auto results = resolver.resolve(address.host, std::to_string(address.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty())
    throw std::runtime_error("cannot listen on " + address.text + ": " + (ec ? ec.message() : "no address"));
  tcp::endpoint endpoint = results.begin()->endpoint();
  auto acceptor = std::make_unique<tcp::acceptor>(impl_->io);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) ::fcntl(acceptor->native_handle(), F_SETFD, FD_CLOEXEC); // Asio opens without SOCK_CLOEXEC
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + address.text + ": " + ec.message());
  tcp::endpoint bound = acceptor->local_endpoint();
  impl_->accept<tcp>(*acceptor, tls);
  (tls ? impl_->tls_acceptors : impl_->tcp_acceptors).push_back(std::move(acceptor));
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  return (tls ? "https://" : "http://") + host + ":" + std::to_string(bound.port());
}

void HttpServer::setTlsIdentity(const std::shared_ptr<const TlsIdentity>& identity) {
  impl_->tls_context = identity ? asioContext(*identity) : nullptr;
}

void HttpServer::stop(std::function<void()> drained) {
  if (!impl_ || impl_->stopping) return;
  impl_->stopping = true;
  impl_->on_drained = std::move(drained);
  boost::system::error_code ec;
  for (auto& a : impl_->tcp_acceptors) a->close(ec);
  for (auto& a : impl_->tls_acceptors) a->close(ec);
  for (auto& a : impl_->unix_acceptors) a->close(ec);
  for (const auto& path : impl_->unix_paths) ::unlink(path.c_str());
  for (auto& weak : impl_->sessions)
    if (auto session = weak.lock()) session->stopping();
  impl_->reap();
  if (impl_->live == 0 && impl_->on_drained) asio::post(impl_->io, std::exchange(impl_->on_drained, {}));
}

void HttpServer::setLimits(const config::Limits& limits) { impl_->applyLimits(limits, false); }

ServerStats HttpServer::stats() const {
  impl_->reap();
  ServerStats s;
  s.connections = impl_->sessions.size();
  s.streams = impl_->streams;
  s.stream_bytes_queued = impl_->stream_bytes;
  s.accept_errors = impl_->accept_errors;
  s.max_connections = impl_->limits.max_connections;
  return s;
}

void HttpServer::setBodyPolicy(BodyPolicy policy) { impl_->body_policy = std::move(policy); }

size_t HttpServer::connectionCount() const {
  impl_->reap();
  return impl_->sessions.size();
}

} // namespace hwfarm::api
