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
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include "config/tokens.h"
#include "daemon/services/disk_room.h"

namespace hwfarm::api {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kMaxQueuedStreamBytes = 4 * 1024 * 1024; // per streamed response
constexpr size_t kUploadChunk = 64 * 1024;                  // bytes read per step of a spooled body

// A request body being written to a file and hashed as it arrives
// (BodyPlan::Kind::file). Owns the file until released: destroying it
// closes and removes the file, so an upload that fails stores nothing.
struct Spool {
  int fd = -1;
  std::string path;
  std::string dir; // path's
  EVP_MD_CTX* sha = nullptr;
  uint64_t bytes = 0;
  std::array<char, kUploadChunk> chunk;

  ~Spool() {
    if (fd >= 0) ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
    if (sha) EVP_MD_CTX_free(sha);
  }
  // Creates the file in `dir`; false with `error` set on failure.
  bool open(const std::string& dir, std::string* error) {
    std::string name = dir + "/.upload-XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0) {
      *error = "cannot create " + name + ": " + std::strerror(errno);
      return false;
    }
    path = name;
    this->dir = dir;
    sha = EVP_MD_CTX_new();
    if (!sha || EVP_DigestInit_ex(sha, EVP_sha256(), nullptr) != 1) {
      *error = "cannot start a SHA-256 digest";
      return false;
    }
    return true;
  }
  // Appends n bytes of `chunk`; 0 on success, else errno.
  int append(size_t n) {
    if (EVP_DigestUpdate(sha, chunk.data(), n) != 1) return EIO;
    for (size_t done = 0; done < n;) {
      ssize_t w = ::write(fd, chunk.data() + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return errno;
      done += static_cast<size_t>(w);
    }
    bytes += n;
    return 0;
  }
  // Closes the file; the hex digest, or empty with `error` set.
  std::string finish(std::string* error) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(sha, digest, &size) != 1) {
      *error = "cannot finish the SHA-256 digest";
      return {};
    }
    int fd_closed = ::close(std::exchange(fd, -1));
    if (fd_closed != 0) {
      *error = "cannot write " + path + ": " + std::strerror(errno);
      return {};
    }
    std::string out;
    config::appendHex(out, digest, size);
    return out;
  }
};

// A failed accept() (EMFILE, ENFILE, ENOBUFS...) is retried after this, not
// at once: the listening socket stays readable, so retrying at once spins.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// Failed accepts are logged at most once per interval, with a count.
constexpr auto kAcceptLogInterval = std::chrono::seconds(10);

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

} // namespace

// Connection timeouts run on the system's monotonic clock (Asio's timers do):
// not hwfarm's Clock, which the services take.
using SteadyClock = std::chrono::steady_clock;

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void closeIfIdle() = 0;
  // Acts on a deadline that has passed.
  virtual void sweep(SteadyClock::time_point now) = 0;
};

// How often deadlines are checked: timeouts fire up to this much late.
constexpr auto kSweepInterval = std::chrono::milliseconds(100);

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
  std::vector<std::unique_ptr<tcp::acceptor>> tcp_acceptors;
  std::vector<std::unique_ptr<local::acceptor>> unix_acceptors;
  std::vector<std::string> unix_paths;
  size_t own_descriptors;

  asio::steady_timer sweeper;
  bool sweeping = false;

  uint64_t accept_errors = 0;
  uint64_t accept_errors_unlogged = 0; // since the last report
  SteadyClock::time_point next_accept_log{};
  size_t streams = 0;         // streamed responses open
  uint64_t stream_bytes = 0;  // queued for them, not yet sent

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
  int64_t requested_connections = 0;

  template <class Protocol>
  void accept(typename Protocol::acceptor& acceptor);
  template <class Protocol>
  void acceptFailed(typename Protocol::acceptor& acceptor, const boost::system::error_code& ec);
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
    server_->stream_bytes -= queued_bytes_;
    if (streaming_) --server_->streams;
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

  void sweep(SteadyClock::time_point now) override {
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
    deadline_ = SteadyClock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
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
  // The head is read first: the body policy decides from it where the body
  // goes and how large it may be, or answers without reading it.
  void readRequest() {
    head_.emplace();
    head_->header_limit(kHeaderLimit);
    head_->body_limit(boost::none); // checked against the plan's limit below
    spool_.reset();
    body_limit_ = static_cast<uint64_t>(server_->limits.max_body_bytes);
    body_limit_name_ = "limits.max_body_bytes";
    timed_out_ = false;
    expireIn(Wait::request, server_->limits.header_timeout_s);
    http::async_read_header(socket_, buffer_, *head_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->waiting_ = Wait::none;
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
    if (ec) return onRead(ec);
    BodyPlan plan;
    if (server_->body_policy) plan = server_->body_policy(headOf(head_->get()));
    if (plan.kind == BodyPlan::Kind::refuse) {
      keep_alive_ = false;
      drain_ = true;
      return write(std::move(plan.refusal));
    }
    if (plan.kind == BodyPlan::Kind::file) {
      body_limit_ = plan.limit;
      body_limit_name_ = plan.limit_name;
      body_reserve_ = plan.reserve;
    }
    if (head_->content_length() && *head_->content_length() > body_limit_) {
      drain_ = plan.kind == BodyPlan::Kind::file;
      return onRead(http::error::body_limit);
    }
    if (plan.kind == BodyPlan::Kind::file) {
      // A body the disk has no room for is refused before it is read.
      if (Status room = roomFor(plan.dir, head_->content_length().value_or(0), plan.reserve); !room.ok())
        return refuseUpload(room);
      std::string error;
      spool_ = std::make_unique<Spool>();
      if (!spool_->open(plan.dir, &error)) {
        spool_.reset();
        spdlog::error("cannot store an upload: {}", error);
        keep_alive_ = false;
        return write(jsonError(500, "storage_error", "cannot store the upload: " + error));
      }
    }
    auto& message = head_->get();
    bool expects = beast::iequals(message[http::field::expect], "100-continue") && !head_->is_done();
    if (!expects) return readBody();
    // The client waits for this before it sends its body.
    auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    asio::async_write(socket_, asio::buffer(*interim), [self = this->shared_from_this(), interim](beast::error_code ec, size_t) {
      if (ec) return self->close();
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
    // The same deadline as the head's: the whole request within header_timeout_s.
    waiting_ = Wait::request;
    server_->armSweeper();
    http::async_read(socket_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->waiting_ = Wait::none;
                       self->onRead(ec);
                     });
  }

  // A spooled body: each step must arrive within header_timeout_s (a large
  // upload takes as long as it needs while it keeps moving). Memory per
  // upload stays one chunk.
  void readUploadChunk() {
    if (upload_->is_done()) return onUpload();
    auto& body = upload_->get().body();
    body.data = spool_->chunk.data();
    body.size = spool_->chunk.size();
    body.more = true;
    expireIn(Wait::request, server_->limits.header_timeout_s);
    http::async_read_some(socket_, buffer_, *upload_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->waiting_ = Wait::none;
      if (ec == http::error::need_buffer) ec = {};
      if (ec) return self->onRead(ec); // the spool goes with the next request or the session
      size_t n = self->spool_->chunk.size() - self->upload_->get().body().size;
      if (Status room = roomFor(self->spool_->dir, n, self->body_reserve_); n && !room.ok()) {
        self->spool_.reset();
        return self->refuseUpload(room);
      }
      if (int e = n ? self->spool_->append(n) : 0) {
        std::string error = "cannot write " + self->spool_->path + ": " + std::strerror(e);
        spdlog::error("cannot store an upload: {}", error);
        self->spool_.reset();
        self->keep_alive_ = false;
        bool full = e == ENOSPC || e == EDQUOT;
        return self->write(jsonError(full ? 507 : 500, full ? "insufficient_storage" : "storage_error",
                                     "cannot store the upload: " + error));
      }
      self->readUploadChunk();
    });
  }

  // 507 for an upload the disk has no room for (roomFor, disk_room.h); the
  // connection closes, the rest of the body unread.
  void refuseUpload(const Status& room) {
    spdlog::warn("upload refused: {}", room.message());
    keep_alive_ = false;
    drain_ = true;
    write(jsonError(507, "insufficient_storage", "cannot store the upload: " + room.message()));
  }

  void onUpload() {
    std::string error;
    std::string sha = spool_->finish(&error);
    if (sha.empty()) {
      spdlog::error("cannot store an upload: {}", error);
      spool_.reset();
      keep_alive_ = false;
      return write(jsonError(500, "storage_error", "cannot store the upload: " + error));
    }
    auto& message = upload_->get();
    keep_alive_ = message.keep_alive();
    http10_ = message.version() == 10;
    HttpRequest request = headOf(message);
    request.upload = HttpRequest::Upload{spool_->path, sha, spool_->bytes};
    busy_ = true;
    responded_ = false;
    server_->handler(std::move(request), std::make_shared<Answer>(this->shared_from_this(), ++exchange_));
    spool_.reset(); // removes the file unless the handler took it
  }

  void onRead(beast::error_code ec) {
    if (ec && timed_out_) ec = beast::error::timeout;
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return close();
    spool_.reset();
    if (ec) {
      keep_alive_ = false;
      if (ec == http::error::body_limit)
        return write(jsonError(413, "payload_too_large",
                               "request body exceeds " + std::to_string(body_limit_) + " bytes (" + body_limit_name_ +
                                   ")"));
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
    request.content_type = std::string(message[http::field::content_type]);
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

  // While a long-poll answer is pending or a stream runs, notice the client
  // hanging up. Whatever the client sends meanwhile is read, so that its
  // close is seen behind it: bytes of a pipelined request are kept for after
  // the answer (at most one whole request; more counts as leaving), bytes
  // sent to a stream are dropped.
  void watchForClose() {
    watching_ = true;
    socket_.async_wait(Protocol::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
      self->watching_ = false;
      if (ec || (self->responded_ && !self->streaming_)) return;
      auto space = self->buffer_.prepare(4096);
      ssize_t n = ::recv(self->socket_.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watchForClose();
      if (n > 0) {
        if (!self->streaming_) self->buffer_.commit(static_cast<size_t>(n));
        size_t most = kHeaderLimit + static_cast<size_t>(self->server_->limits.max_body_bytes);
        if (self->buffer_.size() <= most) return self->watchForClose();
      }
      self->clientGone();
      self->busy_ = false;
      self->close();
    });
  }

  // The client left (or must be dropped) before its answer ended.
  void clientGone() {
    gone_ = true;
    drained_hook_ = nullptr;
    if (auto hook = std::exchange(gone_hook_, {})) hook();
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
        session_->drained_hook_ = nullptr;
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
    size_t queued() const override { return session_->queued_bytes_; }
    void onDrained(std::function<void()> on_drained) override {
      if (!session_->gone_ && !ended_) session_->drained_hook_ = std::move(on_drained);
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
    queueRaw(head + "\r\n");
    auto sink = std::make_shared<Sink>(this->shared_from_this());
    if (!response.body.empty()) sink->write(std::move(response.body));
    streaming_ = true;
    ++server_->streams;
    watchForClose();
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
  // idle_timeout_s closes the connection (the sweeper's write deadline), so a
  // reader that stopped reading does not hold its stream open.
  void flushQueue() {
    if (writing_ || gone_) return;
    if (queue_.empty()) {
      if (close_after_queue_) {
        drained_hook_ = nullptr;
        boost::system::error_code ignored;
        socket_.shutdown(Protocol::socket::shutdown_send, ignored);
        close();
      } else if (drained_hook_) {
        auto hook = drained_hook_; // may write more, or end the stream
        hook();
      }
      return;
    }
    writing_ = true;
    auto data = std::make_shared<std::string>(std::move(queue_.front()));
    queue_.pop_front();
    expireIn(Wait::write, server_->limits.idle_timeout_s);
    asio::async_write(socket_, asio::buffer(*data),
                      [self = this->shared_from_this(), data](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        self->waiting_ = Wait::none;
                        self->queued_bytes_ -= data->size();
                        self->server_->stream_bytes -= data->size();
                        if (ec) {
                          self->clientGone();
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
        if (!ec && std::exchange(self->drain_, false)) return self->drainThenClose();
        return self->close();
      }
      self->waitForRequest();
    });
  }

  // After an answer to an upload whose body was not read: a client that
  // did not wait for 100 Continue is still sending it, and closing with
  // unread data would reset the connection before it reads the answer.
  // Reads and drops until the client closes, within header_timeout_s.
  void drainThenClose() {
    expireIn(Wait::request, server_->limits.header_timeout_s);
    auto sink = std::make_shared<std::array<char, 16384>>();
    socket_.async_read_some(asio::buffer(*sink), [self = this->shared_from_this(), sink](beast::error_code ec, size_t) {
      if (!ec) return self->drainThenClose();
      self->waiting_ = Wait::none;
      self->close();
    });
  }

  bool local_;
  typename Protocol::socket socket_;
  std::shared_ptr<HttpServer::Impl> server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> head_;    // until the body plan is made
  std::optional<http::request_parser<http::string_body>> parser_;  // a body read into memory
  std::optional<http::request_parser<http::buffer_body>> upload_;  // a body spooled to a file
  std::unique_ptr<Spool> spool_;
  uint64_t body_limit_ = 0;
  std::string body_limit_name_;
  uint64_t body_reserve_ = 0;
  // Timeouts are deadlines the server's sweeper checks (HttpServer::Impl::sweep):
  // no timer operation per request.
  Wait waiting_ = Wait::none;
  SteadyClock::time_point deadline_{};
  std::function<void()> gone_hook_;
  std::function<void()> drained_hook_; // a stream's writer waiting for room
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
  bool drain_ = false; // the answer is to an unread upload: drainThenClose after it
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
    if (ec) return self->acceptFailed<Protocol>(acceptor, ec);
    // Asio accepts without SOCK_CLOEXEC: no child may inherit a client.
    ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
    self->reap();
    bool reject = self->sessions.size() >= static_cast<size_t>(self->limits.max_connections);
    auto session = std::make_shared<Session<Protocol>>(std::move(socket), self);
    (reject ? self->rejected : self->sessions).push_back(session);
    session->start(reject);
    self->accept<Protocol>(acceptor);
  });
}

template <class Protocol>
void HttpServer::Impl::acceptFailed(typename Protocol::acceptor& acceptor, const boost::system::error_code& ec) {
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
  if (ec == asio::error::connection_aborted) return accept<Protocol>(acceptor);
  auto timer = std::make_shared<asio::steady_timer>(io, kAcceptBackoff);
  timer->async_wait([self = shared_from_this(), &acceptor, timer](const boost::system::error_code& e) {
    if (e || self->stopping) return;
    self->accept<Protocol>(acceptor);
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
  if (!ec) ::fcntl(acceptor->native_handle(), F_SETFD, FD_CLOEXEC); // Asio opens without SOCK_CLOEXEC
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
