#include "daemon/api/tls_identity.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <ctime>

#include "config/loader.h"
#include "config/private_file.h"

namespace hwfarm::api {

namespace {

constexpr size_t kMaxPemBytes = 1024 * 1024;

// OpenSSL's reason for the last failure ("no start line"), clearing its queue.
std::string openSslReason() {
  unsigned long code = ERR_peek_last_error();
  const char* reason = code ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason ? reason : "unknown OpenSSL error";
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

std::unique_ptr<BIO, BioFree> memoryBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string subjectOf(X509* cert) {
  char* line = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0);
  std::string subject = line ? line : "";
  OPENSSL_free(line);
  if (!subject.empty() && subject.front() == '/') subject.erase(0, 1); // "/CN=x" -> "CN=x"
  return subject;
}

int64_t notAfterMsOf(X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

Status fileError(const std::string& key, const std::string& file, const std::string& why) {
  return Status::error(Code::invalid_argument, "agent." + key + " " + file + ": " + why);
}

// The leaf and the rest of the chain (intermediates) into `ctx`.
Status useChain(SSL_CTX* ctx, const std::string& pem, const std::string& file, X509** leaf_out) {
  auto bio = memoryBio(pem);
  std::unique_ptr<X509, X509Free> leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr));
  if (!leaf)
    return fileError("tls_cert", file, "no PEM certificate (\"-----BEGIN CERTIFICATE-----\"): " + openSslReason());
  if (SSL_CTX_use_certificate(ctx, leaf.get()) != 1)
    return fileError("tls_cert", file, "the certificate is not usable: " + openSslReason());
  while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      return fileError("tls_cert", file, "a chain certificate is not usable: " + openSslReason());
    }
  }
  ERR_clear_error(); // the end of the file reads as "no start line"
  *leaf_out = leaf.release();
  return Status();
}

} // namespace

TlsIdentity::TlsIdentity(SSL_CTX* context, std::string subject, int64_t not_after_ms, std::string cert_file)
    : context_(context), subject_(std::move(subject)), not_after_ms_(not_after_ms), cert_file_(std::move(cert_file)) {}

TlsIdentity::~TlsIdentity() { SSL_CTX_free(context_); }

Result<std::shared_ptr<const TlsIdentity>> TlsIdentity::load(const std::string& cert_file, const std::string& key_file) {
  std::string cert_pem, key_pem, error;
  if (!config::readTextFile(cert_file, &cert_pem, &error, kMaxPemBytes)) return fileError("tls_cert", cert_file, error);
  if (auto refused = config::readPrivateFile(key_file, "TLS key file", kMaxPemBytes, &key_pem))
    return fileError("tls_key", key_file, *refused);

  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return Status::error(Code::internal, "cannot create a TLS context: " + openSslReason());
  // TLS 1.2 and 1.3 only; ciphers and groups are OpenSSL's defaults (on
  // Debian: security level 2).
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  X509* leaf_raw = nullptr;
  if (Status s = useChain(ctx.get(), cert_pem, cert_file, &leaf_raw); !s.ok()) return s;
  std::unique_ptr<X509, X509Free> leaf(leaf_raw);

  auto bio = memoryBio(key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  // The key's text is not needed any more.
  OPENSSL_cleanse(key_pem.data(), key_pem.size());
  if (!key)
    return fileError("tls_key", key_file,
                     "no unencrypted PEM private key (\"-----BEGIN PRIVATE KEY-----\"): " + openSslReason());
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
    ERR_clear_error();
    return fileError("tls_key", key_file, "the key does not belong to the certificate of agent.tls_cert " + cert_file);
  }
  return std::make_shared<const TlsIdentity>(ctx.release(), subjectOf(leaf.get()), notAfterMsOf(leaf.get()), cert_file);
}

} // namespace hwfarm::api
