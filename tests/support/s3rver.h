// Test support: a real S3-compatible server (npm's s3rver 3.7.1 on
// 127.0.0.1, installed into tests/s3/node_modules by
// scripts/install-deps.sh), the node process itself (not an npx wrapper),
// stopped by its pid.
#pragma once

#include <memory>
#include <string>

#include "tests/support/process.h"

namespace hwfarm::test {

class S3rver {
 public:
  static constexpr const char* kBucket = "hw-results";
  static constexpr const char* kKey = "S3RVER"; // its default access key id and secret

  // Starts s3rver with the bucket kBucket, its data under `data`, on `port`
  // (0: a free one) and waits until it listens. Throws with its log when it
  // does not start within 20 s.
  S3rver(const TempDir& dir, const std::string& data, int port = 0);
  ~S3rver();
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  // SIGTERM, then SIGKILL after 10 s; nothing when stopped already.
  void stop();
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  static inline int starts_ = 0;
  std::unique_ptr<Process> process_;
  int port_ = 0;
};

// Writes an S3 credentials file (mode 0600) with access key id `key` and
// s3rver's secret to dir/name; returns its path.
std::string s3Credentials(const TempDir& dir, const std::string& key = S3rver::kKey, const std::string& name = "s3.toml");

// An [upload] table for s3rver on `port`: bucket S3rver::kBucket under
// `prefix`, the credentials file `credentials`, short timeouts and retries.
std::string uploadTable(int port, const std::string& prefix, const std::string& credentials);

} // namespace hwfarm::test
