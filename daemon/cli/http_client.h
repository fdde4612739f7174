// A small synchronous HTTP/1.1 client for hwfarmctl, over TCP, TLS or a unix
// socket (Beast and OpenSSL inside the .cpp).
#pragma once

#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>

namespace hwfarm::cli {

struct HttpResult {
  int status = 0;
  std::string body;
};

// A request that would put CR, LF or another control character into its
// request line or a header (an injected header); nothing was sent.
class UnsafeRequest : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The daemon could not be reached (connect, send or receive failed).
class Unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The server could not be trusted over https:// (its certificate expired,
// is for another name, or no CA vouches for it), or the CA file cannot be
// used. Nothing was sent; trying again does not help.
class TlsRefused : public Unreachable {
 public:
  using Unreachable::Unreachable;
};

// The request was ended by Cancellation::cancel(); its connection is closed.
class Cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Ends the requests of the clients it is given to, from any thread: a
// request in flight throws Cancelled and closes its connection; one that
// starts later throws at once.
class Cancellation {
 public:
  void cancel();
  bool cancelled() const;

 private:
  friend class HttpClient;
  // The running request's stop (REQUIRES: called by its thread).
  bool attach(std::function<void()> stop);
  void detach();

  mutable std::mutex mutex_;
  bool cancelled_ = false;
  std::function<void()> stop_;
};

class HttpClient {
 public:
  // `url`: "http://HOST:PORT", "https://HOST[:PORT]" (443 by default) or
  // "unix:/path/to.sock". Throws std::invalid_argument for anything else.
  // https:// verifies the server's certificate and name against `cacert` (a
  // PEM file of CA certificates) or, when empty, the system's CA store; there
  // is no way around a failed verification. With `cancellation`, request()
  // can be ended from another thread.
  explicit HttpClient(const std::string& url, double timeout_s = 30, std::string cacert = "",
                      Cancellation* cancellation = nullptr);

  // One request on a fresh connection. Throws Unreachable on transport
  // errors (TlsRefused: an untrusted server), UnsafeRequest for a target or
  // token with control characters.
  // An "application/octet-stream" body (an image upload) is sent with
  // Expect: 100-continue, so a refusal arrives before the body is sent.
  HttpResult request(const std::string& method, const std::string& target, const std::string& body,
                     const std::string& token, const std::string& content_type = "application/json") const;

  // A GET whose body arrives over time (chunked): `on_data` gets each piece
  // as it comes, until the server ends it. Returns the status; throws
  // Unreachable on transport errors.
  // An error answer's body goes to `error_body` instead.
  // With `stopped_by`, SIGINT and SIGTERM end the stream early: it returns 0
  // and sets *stopped_by to the signal (0 when the stream ended by itself).
  // With `idle_s` above 0, a stream that sends nothing for that long is cut
  // (Unreachable); else, once connected, it may wait for its data forever.
  int stream(const std::string& target, const std::string& token,
             const std::function<void(const std::string&)>& on_data, std::string* error_body,
             int* stopped_by = nullptr, double idle_s = 0) const;

  // "https://lab-01:7443", "unix:/run/hwfarm/hwfarmd.sock": for messages.
  std::string where() const;

 private:
  std::string host_;
  std::string port_;
  std::string unix_path_;
  bool tls_ = false;
  std::string cacert_;
  double timeout_s_;
  Cancellation* cancellation_;
};

} // namespace hwfarm::cli
