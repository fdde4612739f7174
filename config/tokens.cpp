#include "config/tokens.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <regex>
#include <stdexcept>

#include "config/echo.h"
#include "config/private_file.h"
#include "config/toml_reader.h"

namespace hwfarm::config {

const char* toString(Role role) {
  switch (role) {
    case Role::viewer: return "viewer";
    case Role::pipeline: return "pipeline";
    case Role::operator_: return "operator";
  }
  return "viewer";
}

void appendHex(std::string& out, const unsigned char* data, size_t size) {
  static const char* hex = "0123456789abcdef";
  size_t at = out.size();
  out.resize(at + size * 2);
  for (size_t i = 0; i < size; ++i) {
    out[at + 2 * i] = hex[data[i] >> 4];
    out[at + 2 * i + 1] = hex[data[i] & 15];
  }
}

std::string sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // A failed digest must not pass as the hash "" (every token would be refused,
  // or worse, compared against an empty hash).
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1 || length == 0)
    throw std::runtime_error("SHA-256 failed (OpenSSL EVP_Digest)");
  std::string out;
  appendHex(out, digest, length);
  return out;
}

std::string randomHex(size_t bytes) {
  // The kernel's CSPRNG, fetched 4 KiB at a time: a lease id costs no
  // system call and no OpenSSL DRBG lookup on the request path. (Children
  // forked by hwfarm exec at once and never draw from a copy of the pool.)
  thread_local unsigned char pool[4096];
  thread_local size_t left = 0;
  std::string out;
  out.reserve(bytes * 2);
  while (bytes > 0) {
    if (left == 0) {
      if (RAND_bytes(pool, sizeof pool) != 1) throw std::runtime_error("RAND_bytes failed");
      left = sizeof pool;
    }
    size_t take = std::min(bytes, left);
    appendHex(out, pool + sizeof pool - left, take);
    std::memset(pool + sizeof pool - left, 0, take); // never handed out twice
    left -= take;
    bytes -= take;
  }
  return out;
}

TokensResult parseTokens(std::string_view text, const std::string& file) {
  TokensResult result;
  toml::table root;
  if (auto problem = parseToml(text, file, &root)) {
    result.errors.push_back(std::move(*problem));
    return result;
  }
  ErrorSink errors(file);
  TableReader top(root, errors, "", "");
  std::map<std::string, std::string> names, hashes;
  if (const toml::array* tokens = top.tables("token")) {
    for (size_t i = 0; i < tokens->size(); ++i) {
      const toml::table& t = *tokens->get(i)->as_table();
      TableReader r(t, errors, "token #" + std::to_string(i + 1), "");
      Token token;
      bool ok = true;
      if (auto v = r.text("name", Need::required)) {
        static const std::regex re("[A-Za-z0-9][A-Za-z0-9._@-]{0,63}");
        if (!std::regex_match(*v, re)) {
          r.error("name", "expected a name of letters, digits, \".\", \"_\", \"@\" or \"-\", got " + quoteForMessage(*v));
          ok = false;
        } else if (*v == "anonymous") {
          r.error("name", "\"anonymous\" is reserved for anonymous loopback access");
          ok = false;
        } else if (auto [it, inserted] = names.emplace(*v, errors.posText(t.get("name")->source())); !inserted) {
          r.error("name", "token name \"" + *v + "\" is already used (first defined at " + it->second + ")");
          ok = false;
        }
        token.name = *v;
      } else {
        ok = false;
      }
      if (auto v = r.text("role", Need::required)) {
        if (*v == "viewer") token.role = Role::viewer;
        else if (*v == "pipeline") token.role = Role::pipeline;
        else if (*v == "operator") token.role = Role::operator_;
        else {
          r.error("role", "expected \"viewer\", \"pipeline\" or \"operator\", got " + quoteForMessage(*v));
          ok = false;
        }
      } else {
        ok = false;
      }
      if (auto v = r.text("sha256", Need::required)) {
        std::string hex = *v;
        std::transform(hex.begin(), hex.end(), hex.begin(), [](unsigned char c) { return std::tolower(c); });
        static const std::regex re("[0-9a-f]{64}");
        if (!std::regex_match(hex, re)) {
          r.error("sha256", "expected the 64 hex digits of the token's SHA-256 (hwfarmctl token new prints it)");
          ok = false;
        } else if (auto [it, inserted] = hashes.emplace(hex, token.name); !inserted) {
          r.error("sha256", "the same token is already defined for \"" + it->second + "\"");
          ok = false;
        }
        token.sha256 = hex;
      } else {
        ok = false;
      }
      r.finish();
      if (ok) result.tokens.push_back(std::move(token));
    }
  }
  top.finish();
  result.errors = errors.take();
  errors.appendDropped(result.errors);
  if (!result.errors.empty()) result.tokens.clear();
  return result;
}

TokensResult loadTokensFile(const std::string& path) {
  // Whoever may write the file may add an operator token; whoever may read
  // it learns the principals. Only the daemon's user (or root) may do either.
  std::string text;
  if (auto refused = readPrivateFile(path, "tokens file", kMaxTokensBytes, &text)) {
    TokensResult result;
    result.errors.push_back({path, 0, 0, "", "", *refused});
    return result;
  }
  return parseTokens(text, path);
}

} // namespace hwfarm::config
