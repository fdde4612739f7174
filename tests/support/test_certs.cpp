#include "tests/support/test_certs.h"

#include <arpa/inet.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <stdexcept>

namespace hwfarm::test {

namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const { X509_free(x); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what + " failed");
}

Key newKey() {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  check(key != nullptr, "EC key generation");
  return key;
}

void addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "an extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

Cert newCert(const std::string& common_name, EVP_PKEY* key, long from_s, long to_s) {
  static std::atomic<long> serial{1};
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), from_s);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), to_s);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                             -1, -1, 0);
  return cert;
}

std::string pem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(n));
  BIO_free(bio);
  return text;
}

std::string pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(n));
  BIO_free(bio);
  return text;
}

} // namespace

struct TestCa::Impl {
  Key key;
  Cert cert;
};

TestCa::TestCa(const std::string& name) : impl_(std::make_unique<Impl>()) {
  impl_->key = newKey();
  impl_->cert = newCert(name, impl_->key.get(), -86400, 10 * 86400);
  X509_set_issuer_name(impl_->cert.get(), X509_get_subject_name(impl_->cert.get()));
  addExtension(impl_->cert.get(), impl_->cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  addExtension(impl_->cert.get(), impl_->cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  addExtension(impl_->cert.get(), impl_->cert.get(), NID_subject_key_identifier, "hash");
  check(X509_sign(impl_->cert.get(), impl_->key.get(), EVP_sha256()) > 0, "signing the CA");
  ca_ = {pem(impl_->cert.get()), pem(impl_->key.get())};
}

TestCa::~TestCa() = default;

CertAndKey TestCa::issue(const std::vector<std::string>& names, long from_s, long to_s) const {
  Key key = newKey();
  Cert cert = newCert(names.at(0), key.get(), from_s, to_s);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(impl_->cert.get()));
  std::string san;
  for (const auto& n : names) {
    unsigned char buffer[16];
    bool ip = inet_pton(AF_INET, n.c_str(), buffer) == 1 || inet_pton(AF_INET6, n.c_str(), buffer) == 1;
    san += (san.empty() ? "" : ",") + std::string(ip ? "IP:" : "DNS:") + n;
  }
  addExtension(cert.get(), impl_->cert.get(), NID_subject_alt_name, san);
  addExtension(cert.get(), impl_->cert.get(), NID_basic_constraints, "critical,CA:FALSE");
  addExtension(cert.get(), impl_->cert.get(), NID_ext_key_usage, "serverAuth");
  addExtension(cert.get(), impl_->cert.get(), NID_authority_key_identifier, "keyid:always");
  check(X509_sign(cert.get(), impl_->key.get(), EVP_sha256()) > 0, "signing a certificate");
  return {pem(cert.get()), pem(key.get())};
}

} // namespace hwfarm::test
