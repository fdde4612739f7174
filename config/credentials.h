// The upload credentials file (upload.credentials_file): the S3 access key
// of the bucket runs are published to.
//
//   access_key_id = "AKIA..."
//   secret_access_key = "..."
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/loader.h"

namespace hwfarm::config {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
};

struct CredentialsResult {
  S3Credentials credentials;
  std::vector<ConfigError> errors; // FILE:LINE:COLUMN, as the fleet config's
  bool ok() const { return errors.empty(); }
};

inline constexpr size_t kMaxCredentialsBytes = 64 * 1024;

CredentialsResult parseCredentials(std::string_view text, const std::string& file);

// Reads `path` with readPrivateFile's checks (config/private_file.h: refused
// when its group or others may read it, and so on), then parses it.
CredentialsResult loadCredentialsFile(const std::string& path);

} // namespace hwfarm::config
