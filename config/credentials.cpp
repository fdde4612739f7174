#include "config/credentials.h"

#include "config/private_file.h"
#include "config/toml_reader.h"

namespace hwfarm::config {
namespace {

// An access key id or secret: printable ASCII without spaces (what AWS and
// every S3-compatible server issue), so it cannot break a header.
bool plainKey(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (unsigned char c : s)
    if (c <= ' ' || c >= 0x7f) return false;
  return true;
}

} // namespace

CredentialsResult parseCredentials(std::string_view text, const std::string& file) {
  CredentialsResult result;
  toml::table root;
  if (auto problem = parseToml(text, file, &root)) {
    result.errors.push_back(std::move(*problem));
    return result;
  }
  ErrorSink errors(file);
  TableReader r(root, errors, "", "");
  // Messages never quote a value: it is a secret.
  const char* rule = "expected 1 to 256 printable ASCII characters without spaces";
  if (auto v = r.text("access_key_id", Need::required)) {
    if (!plainKey(*v)) r.error("access_key_id", rule);
    else result.credentials.access_key_id = *v;
  }
  if (auto v = r.text("secret_access_key", Need::required)) {
    if (!plainKey(*v)) r.error("secret_access_key", rule);
    else result.credentials.secret_access_key = *v;
  }
  r.finish();
  result.errors = errors.take();
  errors.appendDropped(result.errors);
  if (!result.errors.empty()) result.credentials = {};
  return result;
}

CredentialsResult loadCredentialsFile(const std::string& path) {
  std::string text;
  if (auto refused = readPrivateFile(path, "credentials file", kMaxCredentialsBytes, &text)) {
    CredentialsResult result;
    result.errors.push_back({path, 0, 0, "", "", *refused});
    return result;
  }
  return parseCredentials(text, path);
}

} // namespace hwfarm::config
