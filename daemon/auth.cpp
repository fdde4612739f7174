#include "daemon/auth.h"

#include "config/tokens.h"

namespace hwfarm {

void Authenticator::setTokens(const std::vector<config::Token>& tokens) {
  by_hash_.clear();
  for (const auto& t : tokens) by_hash_[t.sha256] = Principal{t.name, t.role};
}

std::optional<Principal> Authenticator::authenticate(const std::string& authorization, bool local_peer) const {
  if (authorization.empty()) {
    if (anonymous_loopback_ && local_peer) return Principal{"anonymous", config::Role::operator_};
    return std::nullopt;
  }
  static const std::string kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.compare(0, kBearer.size(), kBearer) != 0)
    return std::nullopt;
  auto it = by_hash_.find(config::sha256Hex(authorization.substr(kBearer.size())));
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

bool hasRole(const Principal& principal, config::Role needed) {
  return static_cast<int>(principal.role) >= static_cast<int>(needed);
}

} // namespace hwfarm
