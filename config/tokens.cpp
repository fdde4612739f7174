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
  TokensResult result;
  auto fail = [&](const std::string& message) {
    result.errors.push_back({path, 0, 0, "", "", message});
    return result;
  };
  // The checks and the read use one descriptor: the file cannot be swapped
  // between them. O_NOFOLLOW refuses a symbolic link (another user could aim
  // it anywhere); O_NONBLOCK keeps a FIFO from blocking the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0 && errno == ELOOP)
    return fail("tokens file is a symbolic link; name the file itself (symbolic links are refused)");
  if (fd < 0) return fail(std::string("cannot read file: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(std::string("cannot read file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  // Whoever may write the file may add an operator token; whoever may read
  // it learns the principals. Only the daemon's user (or root) may do either.
  uid_t self = ::geteuid();
  if (st.st_uid != self && st.st_uid != 0)
    return fail("tokens file is owned by uid " + std::to_string(st.st_uid) + ", not by hwfarmd's user (uid " +
                std::to_string(self) + ") or root; run: chown " + std::to_string(self) + " " + path);
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return fail(std::string("tokens file is open to group or others (mode ") + mode +
                "); only its owner may read or write it; run: chmod go-rwx " + path);
  }
  std::string text, error;
  if (!readTextFd(fd, &text, &error, kMaxTokensBytes)) {
    if (error.rfind("file is larger", 0) == 0) error += ", the limit for a tokens file";
    return fail(error);
  }
  return parseTokens(text, path);
}

} // namespace hwfarm::config
