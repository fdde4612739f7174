// What an https:// listener presents: the certificate chain and private key
// of agent.tls_cert and agent.tls_key, loaded and checked together into an
// OpenSSL server context. Asio's TLS stays inside server.cpp.
#pragma once

#include <openssl/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace hwfarm::api {

class TlsIdentity {
 public:
  // Reads both files and builds a TLS server context: TLS 1.2 and later,
  // OpenSSL's default ciphers. The key file is refused as the tokens file is
  // (config/private_file.h: a symbolic link, another owner than hwfarmd's
  // user or root, any access for group or others). Fails, naming the file
  // and the fix, on a file that is not PEM, a key that does not belong to
  // the certificate, and files over 1 MiB. Safe on any thread.
  static Result<std::shared_ptr<const TlsIdentity>> load(const std::string& cert_file, const std::string& key_file);

  TlsIdentity(SSL_CTX* context, std::string subject, int64_t not_after_ms, std::string cert_file);
  ~TlsIdentity();
  TlsIdentity(const TlsIdentity&) = delete;
  TlsIdentity& operator=(const TlsIdentity&) = delete;

  // The server context; it lives as long as this object (each connection's
  // TLS state takes a reference of its own).
  SSL_CTX* context() const { return context_; }
  const std::string& subject() const { return subject_; } // the leaf's subject, "CN=lab-01.example"
  int64_t notAfterMs() const { return not_after_ms_; }    // when the leaf expires (ms since the epoch)
  const std::string& certFile() const { return cert_file_; }

 private:
  SSL_CTX* context_;
  std::string subject_;
  int64_t not_after_ms_;
  std::string cert_file_;
};

} // namespace hwfarm::api
