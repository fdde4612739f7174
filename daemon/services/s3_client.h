// An S3 client over libcurl (docs/uploads.md): path-style requests
// (<endpoint>/<bucket>/<key>) signed with AWS Signature Version 4 by
// libcurl (CURLOPT_AWS_SIGV4, "aws:amz:<region>:s3"), TLS when the endpoint
// is https (the system's CA store, peer and host verified), the proxy from
// the environment (https_proxy, http_proxy, no_proxy: libcurl reads them),
// connect and whole-request timeouts. libcurl stays inside s3_client.cpp.
//
// Every call blocks until the answer (or its timeout): call it off the
// event loop. Calls on different threads are independent (one curl handle
// each).
#pragma once

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "config/credentials.h"

namespace hwfarm {

// What one request got back.
struct S3Answer {
  int http_status = 0; // 0: no answer (connect, DNS, TLS, proxy, timeout)
  std::string body;
  std::string s3_code; // <Code> of S3's XML error body; "" if none
  std::string error;   // a one-line account of a failure ("" on 2xx)
  bool ok() const { return http_status >= 200 && http_status < 300; }
};

// One signed request, as sendSigned sends it (the S3 client's requests, and
// the signing tests' AWS test-suite shapes).
struct SignedRequest {
  std::string method = "GET";
  std::string url; // the path already encoded (upload::encodeKey); sent and signed as it is
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string region = "us-east-1";
  std::string service = "s3";
  // A libcurl CONNECT_TO entry ("HOST:PORT:CONNECT-HOST:CONNECT-PORT"),
  // "" for none: a test signs example.amazonaws.com and talks to 127.0.0.1.
  std::string connect_to;
  double connect_timeout_s = 10;
  double timeout_s = 120;
  // Set (by another thread): the transfer is abandoned within about a second.
  const std::atomic<bool>* cancel = nullptr;
};

// Sends `request` signed with `credentials`. Never throws for a failed
// transfer: the answer says what happened.
S3Answer sendSigned(const SignedRequest& request, const config::S3Credentials& credentials);

struct S3Target {
  std::string endpoint; // "http(s)://HOST[:PORT][/PATH]", no trailing '/'
  std::string region = "us-east-1";
  std::string bucket;
  double connect_timeout_s = 10;
  double timeout_s = 120;
  const std::atomic<bool>* cancel = nullptr; // as SignedRequest::cancel, for every request
};

class S3Client {
 public:
  S3Client(S3Target target, config::S3Credentials credentials)
      : target_(std::move(target)), credentials_(std::move(credentials)) {}

  // PUT Object: `body` under `key`, with x-amz-content-sha256 (signed) and
  // Content-MD5 of the body (S3 refuses a body that does not match).
  S3Answer put(const std::string& key, const std::string& body, const std::string& content_type) const;
  // GET Object.
  S3Answer get(const std::string& key) const;
  // <endpoint>/<bucket>/<key, encoded>.
  std::string url(const std::string& key) const;

 private:
  SignedRequest request(const std::string& method, const std::string& key) const;

  S3Target target_;
  config::S3Credentials credentials_;
};

// Lower-case hex SHA-256 and base64 MD5 of `data` (the payload checksums).
std::string payloadSha256(const std::string& data);
std::string contentMd5(const std::string& data);

} // namespace hwfarm
