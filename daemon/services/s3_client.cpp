#include "daemon/services/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <mutex>
#include <stdexcept>

#include "config/tokens.h"
#include "daemon/core/upload/policy.h"

namespace hwfarm {
namespace {

void initCurl() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("curl_global_init failed");
  });
}

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

int progress(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(cancel)->load() ? 1 : 0;
}

// The text of <tag>...</tag> in an S3 XML error body, or "".
std::string xmlElement(const std::string& body, const std::string& tag) {
  size_t start = body.find("<" + tag + ">");
  if (start == std::string::npos) return {};
  start += tag.size() + 2;
  size_t end = body.find("</" + tag + ">", start);
  if (end == std::string::npos || end - start > 512) return {};
  return body.substr(start, end - start);
}

struct Easy {
  CURL* handle = curl_easy_init();
  curl_slist* headers = nullptr;
  curl_slist* connect_to = nullptr;
  ~Easy() {
    curl_slist_free_all(headers);
    curl_slist_free_all(connect_to);
    if (handle) curl_easy_cleanup(handle);
  }
  void header(const std::string& line) {
    curl_slist* next = curl_slist_append(headers, line.c_str());
    if (!next) throw std::bad_alloc();
    headers = next;
  }
};

} // namespace

S3Answer sendSigned(const SignedRequest& r, const config::S3Credentials& credentials) {
  initCurl();
  S3Answer answer;
  Easy easy;
  if (!easy.handle) {
    answer.error = "curl_easy_init failed";
    return answer;
  }
  CURL* c = easy.handle;
  std::string provider = "aws:amz:" + r.region + ":" + r.service;
  curl_easy_setopt(c, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  // The path is sent (and signed) as given: no "." or ".." segment of a key is resolved away.
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.connect_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, provider.c_str());
  curl_easy_setopt(c, CURLOPT_USERNAME, credentials.access_key_id.c_str());
  curl_easy_setopt(c, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer.body);
  if (!r.connect_to.empty()) {
    easy.connect_to = curl_slist_append(nullptr, r.connect_to.c_str());
    curl_easy_setopt(c, CURLOPT_CONNECT_TO, easy.connect_to);
  }
  if (r.cancel) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(r.cancel));
  }
  if (r.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    // The body from memory: libcurl signs the user's x-amz-content-sha256
    // when one is given, else the hash of these bytes.
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, r.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  }
  for (const auto& [name, value] : r.headers) easy.header(name + ": " + value);
  // No header removal ("Expect:", "Content-Type:"): libcurl 7.88 signs a
  // removed header as an empty one it never sends (the botocore cross-check
  // in tests/s3_signing_test.cpp caught that), so the headers libcurl adds
  // itself (Expect for large bodies, a form Content-Type for a body without
  // one) are left alone: they are not signed.
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, easy.headers);
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    answer.error = std::string(error[0] ? error : curl_easy_strerror(rc));
    answer.body.clear();
    return answer;
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  answer.http_status = static_cast<int>(status);
  if (!answer.ok()) {
    answer.s3_code = xmlElement(answer.body, "Code");
    std::string message = xmlElement(answer.body, "Message");
    answer.error = "HTTP " + std::to_string(status) + (answer.s3_code.empty() ? "" : " " + answer.s3_code) +
                   (message.empty() ? "" : ": " + message);
  }
  return answer;
}

std::string payloadSha256(const std::string& data) { return config::sha256Hex(data); }

std::string contentMd5(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_md5(), nullptr) != 1)
    throw std::runtime_error("MD5 failed (OpenSSL EVP_Digest)");
  unsigned char out[64];
  int n = EVP_EncodeBlock(out, digest, static_cast<int>(length));
  return std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n));
}

std::string S3Client::url(const std::string& key) const {
  return target_.endpoint + "/" + target_.bucket + "/" + upload::encodeKey(key);
}

SignedRequest S3Client::request(const std::string& method, const std::string& key) const {
  SignedRequest r;
  r.method = method;
  r.url = url(key);
  r.region = target_.region;
  r.connect_timeout_s = target_.connect_timeout_s;
  r.timeout_s = target_.timeout_s;
  r.cancel = target_.cancel;
  return r;
}

S3Answer S3Client::put(const std::string& key, const std::string& body, const std::string& content_type) const {
  SignedRequest r = request("PUT", key);
  r.headers = {{"Content-Type", content_type},
               {"Content-MD5", contentMd5(body)},
               {"x-amz-content-sha256", payloadSha256(body)}};
  r.body = body;
  return sendSigned(r, credentials_);
}

S3Answer S3Client::get(const std::string& key) const {
  SignedRequest r = request("GET", key);
  r.headers = {{"x-amz-content-sha256", payloadSha256("")}};
  return sendSigned(r, credentials_);
}

} // namespace hwfarm
