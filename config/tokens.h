// The bearer tokens file: who may call the API and with which role.
//
//   [[token]]
//   name = "jenkins-lab1"      # the principal; owns the leases it takes
//   role = "pipeline"          # viewer | pipeline | operator
//   sha256 = "<64 hex digits>" # SHA-256 of the token; the token itself is never stored
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/loader.h"

namespace hwfarm::config {

enum class Role { viewer, pipeline, operator_ };
const char* toString(Role role);

struct Token {
  std::string name;
  Role role = Role::viewer;
  std::string sha256; // lower-case hex
};

struct TokensResult {
  std::vector<Token> tokens;
  std::vector<ConfigError> errors;
  bool ok() const { return errors.empty(); }
};

TokensResult parseTokens(std::string_view text, const std::string& file);

// Lower-case hex SHA-256 of `data` (how tokens are stored, and the config
// fingerprint /v1/healthz reports).
std::string sha256Hex(const std::string& data);
// Appends `size` bytes of `data` to `out` in lowercase hex.
void appendHex(std::string& out, const unsigned char* data, size_t size);

// `bytes` random bytes from OpenSSL's CSPRNG, as lower-case hex (tokens,
// lease ids, idempotency keys). Throws std::runtime_error if it fails.
std::string randomHex(size_t bytes);

// Reads `path` (at most kMaxTokensBytes). Refuses, with one error naming the
// fix: a symbolic link, anything but a regular file, a file owned by anyone
// but the daemon's effective user or root, and a file its group or others
// may read, write or execute (any bit of 0077). The checks are made with
// fstat on the descriptor that is then read.
TokensResult loadTokensFile(const std::string& path);

} // namespace hwfarm::config
