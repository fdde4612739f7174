#include "daemon/api/auth.h"

#include <cctype>
#include <string_view>

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
  // RFC 7235: credentials = auth-scheme 1*SP token68, the scheme compared
  // without regard to case ("bearer", "BEARER").
  static constexpr std::string_view kBearer = "bearer";
  if (authorization.size() <= kBearer.size() + 1) return std::nullopt;
  for (size_t i = 0; i < kBearer.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kBearer[i]) return std::nullopt;
  size_t token = authorization.find_first_not_of(' ', kBearer.size());
  if (token == kBearer.size() || token == std::string::npos) return std::nullopt;
  auto it = by_hash_.find(config::sha256Hex(authorization.substr(token)));
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

bool hasRole(const Principal& principal, config::Role needed) {
  return static_cast<int>(principal.role) >= static_cast<int>(needed);
}

} // namespace hwfarm
