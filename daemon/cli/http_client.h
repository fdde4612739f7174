// A small synchronous HTTP/1.1 client for hwfarmctl (Beast inside the .cpp).
#pragma once

#include <stdexcept>
#include <string>

namespace hwfarm::cli {

struct HttpResult {
  int status = 0;
  std::string body;
};

// The daemon could not be reached (connect, send or receive failed).
class Unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HttpClient {
 public:
  // `url`: "http://HOST:PORT" or "unix:/path/to.sock". Throws
  // std::invalid_argument for anything else.
  explicit HttpClient(const std::string& url, double timeout_s = 30);

  // One request on a fresh connection. Throws Unreachable on transport errors.
  HttpResult request(const std::string& method, const std::string& target, const std::string& body,
                     const std::string& token) const;

 private:
  std::string host_;
  std::string port_;
  std::string unix_path_;
  double timeout_s_;
};

} // namespace hwfarm::cli
