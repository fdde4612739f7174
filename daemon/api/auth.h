// Who is calling: bearer tokens (by SHA-256) and anonymous loopback access.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/tokens.h"

namespace hwfarm {

struct Principal {
  std::string name; // token name, or "anonymous"
  config::Role role = config::Role::viewer;
};

class Authenticator {
 public:
  void setTokens(const std::vector<config::Token>& tokens);
  void setAnonymousLoopback(bool allowed) { anonymous_loopback_ = allowed; }
  size_t tokenCount() const { return by_hash_.size(); }

  // A known bearer token wins; a request without an Authorization header from
  // a local peer is "anonymous" (operator) when anonymous loopback access is
  // on. Anything else is unauthenticated (nothing returned).
  std::optional<Principal> authenticate(const std::string& authorization, bool local_peer) const;

 private:
  std::unordered_map<std::string, Principal> by_hash_;
  bool anonymous_loopback_ = false;
};

// At least `needed`: viewer < pipeline < operator.
bool hasRole(const Principal& principal, config::Role needed);

} // namespace hwfarm
